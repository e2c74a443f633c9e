# quantize_model: a model made from another one by quantisation (llm-compressor AWQ or RTN; AutoAWQ where it
# is installed), run in the quantize environment. Its manifest carries scheme, group size, calibration,
# wall time, peak RSS, bytes before/after and the quality gate's NLL/KL; a model that fails the gate is
# recorded as failed and its variants' servers refuse to start (worthit.server), so it is never measured.


rule quantize_model:
    input:
        base=lambda wc: manifest_path(config["models"][wc.qmodel]["quantize"]["base"]),
    output:
        manifest="resources/models/{qmodel}/manifest.json",
    log:
        "logs/quantize_model/{qmodel}.log",
    benchmark:
        "logs/quantize_model/{qmodel}.benchmark.tsv"
    resources:
        host_load=HOST_LOAD_ALL,  # never beside a measured server on this host (common.smk)
    params:
        spec=lambda wc: json.dumps(config["models"][wc.qmodel]["quantize"], sort_keys=True),
        python=STUDY.python("quantize"),
    shell:
        "{params.python} -m worthit.experiments.quantize run --name {wildcards.qmodel} --spec {params.spec:q} "
        "--base-manifest {input.base} --out resources/models/{wildcards.qmodel} > {log} 2>&1"


# record_model_not_made: a quantize: model that only variants the plan rules not applicable here would serve
# is never quantised (common.smk: REFUSED); this manifest stands in for it (status not_applicable and why),
# so those variants' measurements record the refusal without it (their servers refuse at once).
rule record_model_not_made:
    output:
        manifest=f"{RESULTS}/models_not_made/{{unmade}}/manifest.json",
    log:
        f"{RESULTS}/logs/models_not_made/{{unmade}}.log",
    benchmark:
        f"{BENCHMARKS}/record_model_not_made/{{unmade}}.tsv"
    localrule: True
    params:
        manifest=lambda wc: json.dumps(REFUSED.manifest(config, wc.unmade), sort_keys=True),
    shell:
        "printf '%s\\n' {params.manifest:q} > {output.manifest} 2> {log}"
