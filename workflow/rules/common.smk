# Config validation, the study grid and the path helpers every stage uses.
import contextlib
import copy
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from worthit import compile_cache, jobenv, measurements, plan  # noqa: E402
from worthit.config import ConfigError, Study, check_gpu_budget, read_yaml, validate  # noqa: E402
from worthit.experiments.deploy.validate import SCENARIOS as DEPLOY_SCENARIOS  # noqa: E402
from worthit.experiments.deploy.validate import validation_files  # noqa: E402
from worthit.experiments.loadtest.section import section as loadtest_section  # noqa: E402
from worthit.errors import InputError  # noqa: E402
from worthit.loadgen.levels import CONC, LoadLevel  # noqa: E402
from worthit.paths import manifest_path  # noqa: E402
from worthit.server.state import forget_incomplete_marks  # noqa: E402
from worthit.experiments.quantize import QuantizeError, check_quantize_plans  # noqa: E402

# the user's thread-count variables, before a job of threads: 0 gets them as 0 (worthit.jobenv)
jobenv.remember(os.environ)

# A study named with --configfile replaces the embedded default instead of being merged into it
# (Snakemake would otherwise add the default's variants to every study).
if workflow.overwrite_configfiles:
    config.clear()
    config.update(copy.deepcopy(workflow.config_settings.overwrite_config))
    _config_source = ", ".join(str(p) for p in workflow.overwrite_configfiles)
else:
    _config_source = ", ".join(str(p) for p in workflow.configfiles) or "config"
try:
    # Snakemake read the files already, keeping the last of a duplicated key silently: read them again to refuse it
    for _f in workflow.overwrite_configfiles or workflow.configfiles:
        read_yaml(_f)
    config = validate(config, _config_source)
except ConfigError as e:
    raise WorkflowError(str(e)) from None

STUDY = Study(config, Path(workflow.basedir))
LOADTEST = loadtest_section(config)  # the study's load levels: which each variant measures, what each sends
try:  # a variant asking for more GPUs than --resources gpu=N grants is refused here, not left waiting
    _gpu = getattr(workflow.global_resources.get("gpu"), "value", workflow.global_resources.get("gpu"))
    # (a cluster job's own Snakemake sees the resource without a value: nothing to check there)
    check_gpu_budget(STUDY, int(_gpu) if isinstance(_gpu, (int, float, str)) else None, _config_source)
except ConfigError as e:
    raise WorkflowError(str(e)) from None
# What the plan rules not applicable on this CPU before anything runs (worthit.plan.refused_before_serving):
# those variants' servers refuse at once (their serve spec says why) and every measurement records the reason;
# a quantize: model only they would serve is never made: a manifest saying so stands in for it.
try:
    REFUSED = plan.refused_before_serving(
        config, plan.hardware_for(config), compile_cache.vllm_version(STUDY.python("serve")), Path.cwd()
    )
except InputError:  # a plan that cannot be made rules nothing out; plan_study records why
    REFUSED = plan.RuledOut()
# Models are fetched (fetch_model, wildcard {model}) or quantised from another model (quantize_model,
# wildcard {qmodel}): disjoint name sets, so exactly one rule makes each resources/models/<name>/manifest.json.
# A model not made (record_model_not_made, wildcard {unmade}) has its stand-in manifest under results/.
FETCHED_MODELS = [m for m, spec in config["models"].items() if "quantize" not in spec]
QUANTIZED_MODELS = [m for m, spec in config["models"].items() if "quantize" in spec and m not in REFUSED.models]
try:
    check_quantize_plans(config, _config_source)
except QuantizeError as e:
    raise WorkflowError(str(e)) from None
# The workflow env's interpreter, spelled the same however Snakemake was started (a changed param reruns jobs).
WORKFLOW_PYTHON = str(Path(sys.prefix) / "bin" / "python")
# The serve rules' command (serve_variant, serve_deployment): the supervisor of one server, from its spec file.
# The empty placeholder comes before Python starts: consumers wait only --latency-wait for the state file
# (worthit.server.supervisor._placeholder).
SUPERVISE_SHELL = (
    f": > {{output.state}} && exec {WORKFLOW_PYTHON} -m worthit.server --state {{output.state}} --log {{log}} "
    "--spec-file {input.spec}"
)
RESULTS = f"results/{STUDY.name}"
# The host's share a job takes (resource host_load; the default profile grants HOST_LOAD_ALL): a measured
# server takes 1, so servers may run side by side as GPUs allow; a job that loads every core of the host
# (quantisation, a GGUF conversion) takes all of it, so it never runs beside a measurement and slows it.
# Where the resource is not granted (a cluster, where each job has its own allocation) nothing is limited.
HOST_LOAD_ALL = 100
VARIANT_DIR = f"{RESULTS}/variant~{{variant}}"
# What every consumer of a variant's server takes as input: the service's state file, ancient() so a
# restarted server does not make the variant's other measurements out of date (see _service_placeholders).
SERVER_STATE = ancient(f"{VARIANT_DIR}/server.json")
# The variant's server specification (model, engine arguments, env): a normal input of every consumer.
SERVE_SPEC = f"{VARIANT_DIR}/serve_spec.json"
# Every job's Snakemake benchmark file: benchmarks/<rule>/<job>.tsv (worthit.cost sums them into cost.parquet).
BENCHMARKS = f"{RESULTS}/benchmarks"
# The report's tables, figures and page (report.smk); the deployments read them (deploy.smk).
REPORT_DIR = f"{RESULTS}/report"
# The experiments' .smk files in the experiments' order (worthit.measurements), for the Snakefile to include.
EXPERIMENT_RULE_FILES = [
    m.rules if os.path.isabs(m.rules) else f"workflow/rules/{m.rules}" for m in measurements.registered()
]


wildcard_constraints:
    study=STUDY.name,
    variant="|".join(STUDY.variants),
    scenario="latency|throughput",
    model="|".join(FETCHED_MODELS) or "(?!)",
    qmodel="|".join(QUANTIZED_MODELS) or "(?!)",
    unmade="|".join(REFUSED.models) or "(?!)",
    c=r"\d+",
    # load runs after the first (loadtest.repeats): '' is run 1, '.rep~2' run 2, ...
    rep="(?:" + "|".join([""] + [rf"\.rep~{r}" for r in range(2, LOADTEST.repeats + 1)]) + ")",


def _service_placeholders():
    """Leave an (empty) server state file for every variant on disk.

    Snakemake deletes service outputs when their group ends, and a consumer whose input comes from a
    job that reruns is rerun too unless that input is ancient() *and exists*. Without this, forcing one
    load level would restart the server and then rerun every measurement of the variant. The
    supervisor overwrites the placeholder when it starts; consumers wait for a live supervisor.

    The file is also made newer than the server's inputs on every parse. A state file older than its
    model manifest or serve_spec.json (a re-fetched model, results copied from another machine) makes
    Snakemake (9.x) schedule the server for "updated input files" *without* the consumers that need it:
    the server would idle until its orphan timeout and the out-of-date measurements would never run.
    Consumers take the file as ancient(), so its mtime never makes them out of date."""
    deployments = [f"deployment~{s}" for s in DEPLOY_SCENARIOS] if STUDY.cfg["validate_deployments"] else []
    states = [
        Path(RESULTS) / folder / "server.json" for folder in [f"variant~{v}" for v in STUDY.variants] + deployments
    ]
    for p in states:
        if not p.exists():
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("{}")
        else:
            with contextlib.suppress(FileNotFoundError):  # a group ending right now removes it
                os.utime(p)
    # a Snakemake killed while a server ran left its state file marked incomplete: --rerun-incomplete would
    # then start the server alone, without its measurements (worthit.server.state.forget_incomplete_marks)
    forget_incomplete_marks([str(p) for p in states])


_service_placeholders()


def model_manifest(model):
    """The model's manifest: resources/models/<model>/manifest.json, or the stand-in of a model not made."""
    return f"{RESULTS}/models_not_made/{model}/manifest.json" if model in REFUSED.models else manifest_path(model)


def get_manifest(wildcards):
    return model_manifest(STUDY.variant(wildcards.variant).model)


def get_serve_spec(wildcards):
    v = STUDY.variant(wildcards.variant)
    refused = REFUSED.reason(config, v.name)
    return json.dumps(
        {
            "variant": v.name,
            "manifest": model_manifest(v.model),
            # the plan rules it not applicable here: the supervisor starts nothing and says why
            **({"refuse": {"status": "not_applicable", "reason": refused}} if refused else {}),
            "python": STUDY.python("serve"),
            "args": v.engine_args,
            "extra": v.extra_args,
            # vLLM's compile cache under resources/, keyed by model, arguments and vLLM: later starts are warm
            "env": compile_cache.with_cache(
                v.env,
                STUDY.python("serve"),
                v.model,
                config["models"][v.model],
                engine_args=v.engine_args,
                extra_args=v.extra_args,
            ),
            "gpus": v.gpus,
            # the KV pool of a smaller card (worthit.plan.emulate), sized at start from the model's files
            **({"emulate_gpu_memory_gib": v.emulate_gpu_memory_gib} if v.emulate_gpu_memory_gib else {}),
            # where the server's API key comes from (never the key: worthit.secrets), when not VLLM_API_KEY
            **({"api_key": STUDY.api_key_source} if STUDY.api_key_source else {}),
        },
        sort_keys=True,  # the same study with its config's keys in another order must not rerun the variant
    )


def load_outputs(variants):
    """Every load-run file of ``variants``: each level (concurrencies, rates, levels naming a workload), each
    run (loadtest.repeats)."""
    return [f"{RESULTS}/variant~{v}/{lv.path(r)}.parquet" for v in variants for lv, r in LOADTEST.level_runs(v)]


def study_aggregates():
    """The study-level summaries: the summary (aggregate.smk), the plan against the measurement (plan.smk) and
    each experiment's own aggregate where it declares one (the figures of prefix caching and speculative
    decoding are the report's: report/prefix.csv, report/specdec.csv)."""
    outputs = [f"{RESULTS}/summary.parquet", f"{RESULTS}/summary.md"]
    outputs += [f"{RESULTS}/plan_vs_measured.parquet", f"{RESULTS}/plan_vs_measured.md"]
    for m in measurements.registered():
        outputs += m.outputs(STUDY, RESULTS)
    return outputs


def get_final_outputs():
    outputs = [f"{RESULTS}/plan.parquet", f"{RESULTS}/plan.md", *study_aggregates()]
    outputs.append(f"{RESULTS}/report.html")  # the study report (report.smk)
    outputs.append(f"{RESULTS}/cost.md")  # what the study cost (cost.smk): the .md, so no report input takes it
    return outputs


def get_validation_files(wildcards=None):
    """The recommended deployments' validation runs (deploy.smk), when the study validates them."""
    return validation_files(RESULTS, LOADTEST.repeats) if STUDY.cfg["validate_deployments"] else []


# loadtest.smk's outputs and inputs (functions live here: rule files hold rules only)
def loadtest_outputs():
    out = {"requests": f"{VARIANT_DIR}/load/{{level}}{{rep}}.parquet"}
    if LOADTEST.timeline_interval_s:
        out["timeline"] = f"{VARIANT_DIR}/load/{{level}}{{rep}}.timeline.parquet"
    return out


def get_workload_files(wildcards):
    """The files the level's workload reads (a jsonl or trace workload): a changed file reruns the level."""
    return LOADTEST.workload_files(wildcards.variant, LOADTEST.level(wildcards.level))


# sweet_spot.smk's inputs: the grid it starts from (run 1 of each of the variant's grid concurrencies) and the
# variant's workload files (its probes send the variant's workload, as the grid did)
def get_sweet_spot_grid(wildcards):
    return [
        f"{RESULTS}/variant~{wildcards.variant}/{LoadLevel(CONC, c).path(1)}.parquet"
        for c in LOADTEST.grid_levels(wildcards.variant)
    ]


def get_sweet_spot_workload_files(wildcards):
    return LOADTEST.workload_files(wildcards.variant, LoadLevel(CONC, 1))


LOAD_LEVEL_PATTERN = "|".join(re.escape(lv.name) for lv in LOADTEST.load_levels)
