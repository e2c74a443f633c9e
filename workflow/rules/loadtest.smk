# loadtest: one job per concurrency level, one row per request; levels of a variant take turns on its server
# (worthit.server.turn), so they never overlap and forcing one does not rerun the others.


rule loadtest:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
    output:
        requests=f"{VARIANT_DIR}/load/conc~{{c}}{{rep}}.parquet",
    log:
        f"{RESULTS}/logs/loadtest/{{variant}}/conc~{{c}}{{rep}}.log",
    group:
        "serve"
    threads: 0
    script:
        "../scripts/loadtest.py"
