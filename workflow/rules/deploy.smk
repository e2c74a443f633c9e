# deploy: each deployment the report recommends (report/deployments.parquet: latency-first and
# throughput-first) served exactly as printed and loaded at the concurrency it promises, once per
# loadtest.repeats run. The server is a service job like a variant's; a scenario without a recommendation
# starts nothing and records why. The report then sets promised against measured (worthit.experiments.deploy.validate).
DEPLOY_DIR = f"{RESULTS}/deployment~{{scenario}}"


rule write_deployment_spec:
    input:
        deployments=f"{REPORT_DIR}/deployments.parquet",
    output:
        spec=f"{DEPLOY_DIR}/serve_spec.json",
    log:
        f"{RESULTS}/logs/deploy/{{scenario}}.spec.log",
    benchmark:
        f"{BENCHMARKS}/write_deployment_spec/{{scenario}}.tsv"
    localrule: True
    params:
        python=STUDY.python("serve"),
    script:
        "../scripts/deployment_spec.py"


rule serve_deployment:
    input:
        spec=f"{DEPLOY_DIR}/serve_spec.json",
    output:
        state=service(f"{DEPLOY_DIR}/server.json"),
    log:
        f"{RESULTS}/logs/serve/deployment~{{scenario}}.log",
    group:
        "serve"
    threads: 0
    resources:
        # which variant a scenario deploys is known only once the report has chosen: the most any variant needs
        gpu=max([STUDY.variant(v).gpus for v in STUDY.variants] or [0]),
        host_load=1,
    shell:
        SUPERVISE_SHELL


rule validate_deployment:
    input:
        server=ancient(f"{DEPLOY_DIR}/server.json"),
        spec=f"{DEPLOY_DIR}/serve_spec.json",
        deployments=f"{REPORT_DIR}/deployments.parquet",
        # the deployed variant's tokenizer builds the prompts; which variant is known only at run time
        manifests=sorted({model_manifest(STUDY.variant(v).model) for v in STUDY.variants}),
        # ... and its workload's files (a jsonl or trace workload), the one its load levels sent
        workloads=sorted({f for v in STUDY.variants for f in LOADTEST.workload_files(v, LoadLevel(CONC, 1))}),
    output:
        requests=f"{DEPLOY_DIR}/load{{rep}}.parquet",
    log:
        f"{RESULTS}/logs/deploy/{{scenario}}{{rep}}.log",
    benchmark:
        f"{BENCHMARKS}/validate_deployment/{{scenario}}{{rep}}.tsv"
    group:
        "serve"
    threads: 0
    script:
        "../scripts/validate_deployment.py"
