# loadtest: one job per load level and run, one row per request; levels of a variant take turns on its server
# (worthit.server.turn), so they never overlap and forcing one does not rerun the others. A level is a
# concurrency (load/conc~16), an open-loop rate (load/rate~2.5) or a level naming its workload
# (load/chat/conc~4, load/prod/replay): worthit.loadgen.levels. With loadtest.timeline_interval_s the level's
# server timeline (/metrics sampled meanwhile) is written beside it: load/conc~16.timeline.parquet.


rule loadtest:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
        workload=get_workload_files,
    output:
        **loadtest_outputs(),
    log:
        f"{RESULTS}/logs/loadtest/{{variant}}/{{level}}{{rep}}.log",
    benchmark:
        f"{BENCHMARKS}/loadtest/{{variant}}/{{level}}{{rep}}.tsv"
    wildcard_constraints:
        level=LOAD_LEVEL_PATTERN,
    group:
        "serve"
    threads: 0
    script:
        "../scripts/loadtest.py"
