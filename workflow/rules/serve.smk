# serve_variant: the variant's vLLM server as a Snakemake service job. Its consumers (KV, load levels,
# prefix lengths, accuracy) share its group, so the server lives exactly while they run.
# Consumers take the state file as ancient(server.json): a restarted server must not make every other
# measurement of the variant out of date. What the server is (model, engine arguments, environment)
# lives in serve_spec.json, a normal input of the server and of every consumer: changing a variant's
# engine arguments reruns exactly that variant's measurements.


rule write_serve_spec:
    output:
        spec=SERVE_SPEC,
    log:
        f"{RESULTS}/logs/serve/{{variant}}.spec.log",
    benchmark:
        f"{BENCHMARKS}/write_serve_spec/{{variant}}.tsv"
    localrule: True
    params:
        spec=get_serve_spec,
    shell:
        "printf '%s\\n' {params.spec:q} > {output.spec} 2> {log}"


rule serve_variant:
    input:
        manifest=get_manifest,
        spec=SERVE_SPEC,
    output:
        state=service(f"{VARIANT_DIR}/server.json"),
    log:
        f"{RESULTS}/logs/serve/{{variant}}.log",
    group:
        "serve"
    threads: 0
    resources:
        gpu=lambda wc: STUDY.variant(wc.variant).gpus,
        host_load=1,
    shell:
        SUPERVISE_SHELL
