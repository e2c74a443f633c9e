# prefix_test: one job per shared-prefix length on every variant whose experiments include `prefix`,
# after its load levels on the same server (worthit.server.turn); aggregate_prefix compares cache on vs off.


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


rule aggregate_prefix:
    input:
        prefix=expand(
            f"{VARIANT_DIR}/prefix/len~{{length}}.parquet",
            variant=STUDY.variants_with("prefix"),
            length=STUDY.prefix_lengths,
        ),
    output:
        parquet=report(f"{RESULTS}/prefix_summary.parquet", category="Experiments"),
        md=report(f"{RESULTS}/prefix_summary.md", category="Experiments", caption="../report/prefix.rst"),
    log:
        f"{RESULTS}/logs/aggregate_prefix.log",
    benchmark:
        f"{BENCHMARKS}/aggregate_prefix/study.tsv"
    script:
        "../scripts/aggregate_prefix.py"
