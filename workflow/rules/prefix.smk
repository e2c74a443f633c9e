# prefix_test: one job per shared-prefix length on every variant whose experiments include `prefix`,
# after its load levels on the same server (worthit.server.turn); the report (report.smk) compares cache on vs
# off (report/prefix.csv).


rule prefix_test:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
    output:
        requests=f"{VARIANT_DIR}/prefix/len~{{length}}.parquet",
    log:
        f"{RESULTS}/logs/prefix/{{variant}}/len~{{length}}.log",
    benchmark:
        f"{BENCHMARKS}/prefix_test/{{variant}}/len~{{length}}.tsv"
    wildcard_constraints:
        length=r"\d+",
    group:
        "serve"
    threads: 0
    script:
        "../scripts/prefix_test.py"
