# Speculative decoding: measure_verify times verify steps on the base variant's server (its last turn
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
    group:
        "serve"
    threads: 0
    script:
        "../scripts/measure_verify.py"


def get_specdec_loads(wildcards):
    names = [*STUDY.spec_variants, STUDY.specdec_base, *(STUDY.draft_variant(v) for v in STUDY.spec_variants)]
    measured = [v for v in dict.fromkeys(names) if v and v in STUDY.variants_with("loadtest")]
    return load_outputs(measured, first_run_only=True)  # the speed-up table reads each level's first run


rule aggregate_specdec:
    input:
        load=get_specdec_loads,
        verify=expand(
            f"{VARIANT_DIR}/specdec/verify.parquet",
            variant=[STUDY.specdec_base] if STUDY.spec_variants else [],
        ),
    output:
        parquet=report(f"{RESULTS}/specdec_summary.parquet", category="Experiments"),
        md=report(f"{RESULTS}/specdec_summary.md", category="Experiments", caption="../report/specdec.rst"),
    log:
        f"{RESULTS}/logs/aggregate_specdec.log",
    script:
        "../scripts/aggregate_specdec.py"
