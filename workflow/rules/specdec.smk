# Speculative decoding. measure_verify times verify steps on the base variant's server (its last turn
# before accuracy); aggregate_specdec combines them with the load levels of the speculative, base and
# draft variants into S = alpha / (k gamma + c) next to the measured TPOT speed-up.


rule measure_verify:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
    output:
        verify=f"{VARIANT_DIR}/specdec/verify.parquet",
    log:
        f"{RESULTS}/logs/specdec/{{variant}}/verify.log",
    benchmark:
        f"{BENCHMARKS}/measure_verify/{{variant}}.tsv"
    group:
        "serve"
    threads: 0
    script:
        "../scripts/measure_verify.py"


rule aggregate_specdec:
    input:
        # the speed-up table reads the first run of each level
        load=load_outputs(STUDY.specdec_load_variants, first_run_only=True),
        verify=expand(
            f"{VARIANT_DIR}/specdec/verify.parquet",
            variant=[STUDY.specdec_base] if STUDY.spec_variants else [],
        ),
    output:
        parquet=report(f"{RESULTS}/specdec_summary.parquet", category="Experiments"),
        md=report(f"{RESULTS}/specdec_summary.md", category="Experiments", caption="../report/specdec.rst"),
    log:
        f"{RESULTS}/logs/aggregate_specdec.log",
    benchmark:
        f"{BENCHMARKS}/aggregate_specdec/study.tsv"
    script:
        "../scripts/aggregate_specdec.py"
