# evaluate_accuracy: lm-eval against the variant's served endpoint, one run per configured task, the last
# measurement on the server (worthit.server.turn); lm-eval's raw results JSON and samples stay in raw/.


rule evaluate_accuracy:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
    output:
        accuracy=VARIANT_DIR + "/accuracy.parquet",
        samples=VARIANT_DIR + "/accuracy_samples.parquet",
        raw=directory(VARIANT_DIR + "/accuracy"),
    log:
        RESULTS + "/logs/accuracy/{variant}.log",
    group:
        "serve"
    threads: 0
    script:
        "../scripts/evaluate_accuracy.py"
