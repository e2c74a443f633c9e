# sweet_spot: per variant of sweet_spot.variants, the highest concurrency meeting the SLO. On the variant's
# server after its grid levels (run 1 of loadtest.levels), it bisects between the last passing and the first
# failing level (worthit.experiments.sweet_spot); one job, however many probes it measures. The grid files are read in
# its turn (params), not inputs: Snakemake starts every member of a server group at once.


rule sweet_spot:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
        manifest=get_manifest,
        workload=get_sweet_spot_workload_files,
    output:
        result=f"{VARIANT_DIR}/sweet_spot.parquet",
    log:
        f"{RESULTS}/logs/sweet_spot/{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/sweet_spot/{{variant}}.tsv"
    group:
        "serve"
    threads: 0
    params:
        grid=get_sweet_spot_grid,
    script:
        "../scripts/sweet_spot.py"
