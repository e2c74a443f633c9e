# aggregate: every variant's KV and load levels -> summary.parquet + summary.md (rebuilt only when a result changes).


rule aggregate:
    input:
        kv=expand(VARIANT_DIR + "/kv.parquet", variant=STUDY.variants_with("kv")),
        load=expand(
            VARIANT_DIR + "/load/conc~{c}.parquet",
            variant=STUDY.variants_with("loadtest"),
            c=STUDY.levels,
        ),
        accuracy=expand(VARIANT_DIR + "/accuracy.parquet", variant=STUDY.variants_with("accuracy")),
        accuracy_samples=expand(VARIANT_DIR + "/accuracy_samples.parquet", variant=STUDY.variants_with("accuracy")),
    output:
        parquet=report(RESULTS + "/summary.parquet", category="Summary"),
        md=report(RESULTS + "/summary.md", category="Summary", caption="../report/summary.rst"),
        accuracy_parquet=report(RESULTS + "/accuracy_summary.parquet", category="Accuracy"),
        accuracy_md=report(RESULTS + "/accuracy_summary.md", category="Accuracy", caption="../report/accuracy.rst"),
    log:
        RESULTS + "/logs/aggregate.log",
    script:
        "../scripts/aggregate.py"
