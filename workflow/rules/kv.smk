# measure_kv: KV blocks, KV tokens and GiB, critical concurrency, from the running server's /metrics.


rule measure_kv:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
    output:
        kv=f"{VARIANT_DIR}/kv.parquet",
    log:
        f"{RESULTS}/logs/kv/{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/measure_kv/{{variant}}.tsv"
    group:
        "serve"
    threads: 0
    script:
        "../scripts/measure_kv.py"
