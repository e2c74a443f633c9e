# Speculative decoding. measure_verify times verify steps on the base variant's server (its last turn
# before accuracy). The report (report.smk) combines them with the load levels of the speculative, base and
# draft variants into S = alpha / (k gamma + c) next to the measured TPOT speed-up (report/specdec.csv).


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
