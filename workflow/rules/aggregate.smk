# aggregate: every variant's KV and load levels -> summary.parquet + summary.md (rebuilt only when a result changes).


rule aggregate:
    input:
        kv=expand(f"{VARIANT_DIR}/kv.parquet", variant=STUDY.variants_with("kv")),
        load=load_outputs(LOADTEST.load_tested),
        accuracy=expand(f"{VARIANT_DIR}/accuracy.parquet", variant=STUDY.variants_with("accuracy")),
        accuracy_samples=expand(f"{VARIANT_DIR}/accuracy_samples.parquet", variant=STUDY.variants_with("accuracy")),
    output:
        parquet=report(f"{RESULTS}/summary.parquet", category="Summary"),
        md=report(f"{RESULTS}/summary.md", category="Summary", caption="../report/summary.rst"),
        accuracy_parquet=report(f"{RESULTS}/accuracy_summary.parquet", category="Accuracy"),
        accuracy_md=report(f"{RESULTS}/accuracy_summary.md", category="Accuracy", caption="../report/accuracy.rst"),
    log:
        f"{RESULTS}/logs/aggregate.log",
    benchmark:
        f"{BENCHMARKS}/aggregate/study.tsv"
    script:
        "../scripts/aggregate.py"
