# fetch_model: download or convert a model once, with a manifest (source, files + sha256, parameters).


rule fetch_model:
    output:
        manifest="resources/models/{model}/manifest.json",
    log:
        "logs/fetch_model/{model}.log",
    benchmark:
        "logs/fetch_model/{model}.benchmark.tsv"
    resources:
        host_load=HOST_LOAD_ALL,  # a GGUF conversion loads every core: never beside a measured server
    params:
        source=lambda wc: config["models"][wc.model]["source"],
        dtype=lambda wc: config["models"][wc.model]["dtype"],
        python=STUDY.python("serve"),
    shell:
        "{params.python} -m worthit.models --name {wildcards.model} --source '{params.source}' "
        "--dtype {params.dtype} --out resources/models/{wildcards.model} > {log} 2>&1"
