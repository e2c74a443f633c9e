# serve_variant: the variant's vLLM server as a Snakemake service job. Its consumers (KV, load levels,
# prefix lengths, accuracy) share its group, so the server lives exactly while they run.
# Consumers take the state file as ancient(server.json): a restarted server must not make every other
# measurement of the variant out of date.


rule serve_variant:
    input:
        manifest=get_manifest,
    output:
        state=service(VARIANT_DIR + "/server.json"),
    params:
        spec=get_serve_spec,
        python=WORKFLOW_PYTHON,
    log:
        RESULTS + "/logs/serve/{variant}.log",
    group:
        "serve"
    threads: 0
    resources:
        gpu=lambda wc: STUDY.variant(wc.variant).gpus,
    shell:
        "exec {params.python} -m worthit.server --state {output.state} --log {log} --spec {params.spec:q}"
