# evaluate_accuracy: lm-eval against the variant's served endpoint, one run per configured task, the last
# measurement on the server (worthit.server.turn); lm-eval's raw results JSON and samples stay in raw/.


rule evaluate_accuracy:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
    output:
        accuracy=f"{VARIANT_DIR}/accuracy.parquet",
        samples=f"{VARIANT_DIR}/accuracy_samples.parquet",
        raw=directory(f"{VARIANT_DIR}/accuracy"),
    log:
        f"{RESULTS}/logs/accuracy/{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/evaluate_accuracy/{{variant}}.tsv"
    group:
        "serve"
    threads: 0
    script:
        "../scripts/evaluate_accuracy.py"
