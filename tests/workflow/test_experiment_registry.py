"""An experiment is one folder and its rule file: a toy experiment written here, outside the package, in a folder
laid out as the built-in ones in src/worthit/experiments/<name>/ (tables, measurement, report analysis, and an
__init__ whose register() adds it to both registries), joins the real workflow on real vLLM (CPU) through the
registries alone (worthit.measurements for the measurement side, worthit.report.experiments for the report).
It touches no file of the repository: the one line elsewhere is WORTHIT_EXPERIMENTS naming it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, run_snakemake, study_config

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# The toy experiment is one folder, laid out as a built-in one in src/worthit/experiments/<name>/: its tables,
# its measurement, its analysis for the report, and an __init__ whose register() adds it to both registries
# (its rule file and the rule's script sit in the folder too, outside the repository).
TOY_TABLES = '''
"""The toy's Parquet tables."""
import pyarrow as pa

from worthit import schemas

TOY = schemas.Table(
    "toy_models",
    "What /v1/models says of the served model.",
    (
        schemas.Field("variant", pa.string(), "variant", False),
        schemas.Field("model_id", pa.string(), "served model id"),
        schemas.Field("max_model_len", pa.int64(), "context length the server reports"),
        schemas.Field("greeting", pa.string(), "toy.greeting from the study config"),
    ),
)
REPORT_TOY = schemas.Table(
    "report_toy",
    "The toy's table in the report.",
    (schemas.Field("variant", pa.string(), "variant", False), schemas.Field("max_model_len", pa.int64(), "context")),
)
'''

TOY_MEASURE = '''
"""The toy's measurement: what the server's /v1/models says of the served model, with a greeting."""
import json
import urllib.request

from toy_exp.tables import TOY
from worthit import stages


def measure(study, variant, state_path, out):
    greeting = study.cfg["toy"]["greeting"]

    def body(state):
        with urllib.request.urlopen(state.url + "/v1/models", timeout=30) as resp:
            card = json.loads(resp.read())["data"][0]
        row = {"variant": variant, "model_id": card["id"], "max_model_len": card["max_model_len"], "greeting": greeting}
        return [row], {}

    stages.consume(study, variant, "toy", out, table=TOY, state_path=state_path, meta={"variant": variant}, body=body)
'''

TOY_REPORT = '''
"""The toy's analysis for the report and its table."""
from toy_exp.tables import REPORT_TOY, TOY
from worthit.report.experiments import Experiment
from worthit.report.views import INT, Column, View


def analyse(ctx):
    return {v: [r for f in ctx.results.variant(v).of(TOY.name) if f.ok for r in f.rows] for v in ctx.variants}


def views(ctx, found):
    rows = [{"variant": v, "max_model_len": r["max_model_len"]} for v, rs in found.items() for r in rs]
    columns = [Column("variant", "variant"), Column("max_model_len", "context", INT)]
    return [View(REPORT_TOY, "Toy", "What /v1/models says.", columns, rows, order=99)]


EXPERIMENT = Experiment("toy", analyse, views=views)
'''

TOY_INIT = '''
"""A toy experiment in one folder: its config section, its turns and its registration with both registries."""
from pathlib import Path

from toy_exp import report
from toy_exp.tables import TOY
from worthit import measurements
from worthit.report import experiments

SECTION = {
    "type": "object",
    "default": {},
    "additionalProperties": False,
    "description": "The toy experiment.",
    "properties": {"greeting": {"type": "string", "default": "hello", "description": "recorded with each row"}},
}


def consumers(study, variant):
    return ["toy"] if "toy" in study.variant(variant).experiments else []


def register():
    rules = str(Path(__file__).with_name("toy.smk"))
    measurements.register(
        measurements.Measurement("toy", consumers, rules, order=15, section=("toy", SECTION), tables=(TOY,))
    )
    experiments.register(report.EXPERIMENT)


register()
'''

TOY_RULES = """
rule toy_measure:
    input:
        server=SERVER_STATE,
        spec=SERVE_SPEC,
    output:
        result=f"{VARIANT_DIR}/toy.parquet",
    log:
        f"{RESULTS}/logs/toy/{{variant}}.log",
    group:
        "serve"
    threads: 0
    script:
        "toy_script.py"
"""

TOY_SCRIPT = """
from toy_exp.measure import measure
from worthit.config import Study
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821
setup_logging(sm.log[0])
measure(Study(sm.config), sm.wildcards.variant, sm.input.server, sm.output.result)
"""


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    plugin = tmp_path / "plugin"
    folder = plugin / "toy_exp"  # the experiment's folder: everything it adds
    folder.mkdir(parents=True)
    files = {
        "__init__.py": TOY_INIT,
        "tables.py": TOY_TABLES,
        "measure.py": TOY_MEASURE,
        "report.py": TOY_REPORT,
        "toy.smk": TOY_RULES,
        "toy_script.py": TOY_SCRIPT,
    }
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.setenv("PYTHONPATH", f"{plugin}:{ROOT / 'src'}")
    monkeypatch.setenv("WORTHIT_EXPERIMENTS", "toy_exp")  # the one line elsewhere: naming the experiment
    return plugin


def test_a_toy_experiment_in_its_own_folder_is_configured_measured_and_reported(tmp_path, toy, model_dir):
    cfg = study_config(model_dir, validate_deployments=False)
    cfg["loadtest"]["levels"] = [1]
    cfg["variants"]["base"]["experiments"] = ["kv", "toy", "loadtest"]
    work = tmp_path / "work"
    run_snakemake(work, cfg, "results/t/report.html")

    results = work / "results/t"
    toy_file = pq.read_table(results / "variant~base/toy.parquet")
    meta = {k.decode(): v.decode() for k, v in toy_file.schema.metadata.items()}
    assert meta["worthit.table"] == "toy_models" and meta["worthit.status"] == "ok", meta
    (row,) = toy_file.to_pylist()
    assert row == {"variant": "base", "model_id": "base", "max_model_len": 2048, "greeting": "hello"}  # its default
    # its turn on the server is the one its order gives it: after kv, before the load level
    logs = results / "logs"
    started = {
        name: next(ln[:23] for ln in log.read_text().splitlines() if "measuring" in ln)
        for name, log in {
            "kv": logs / "kv/base.log",
            "toy": logs / "toy/base.log",
            "load": logs / "loadtest/base/conc~1.log",
        }.items()
    }
    assert sorted(started, key=started.get) == ["kv", "toy", "load"]
    # the report ran its analysis and shows its table
    md = (results / "report/tables.md").read_text()
    assert "## Toy" in md and "| base | 2,048 |" in md.split("## Toy", 1)[1]
    assert 'id="report_toy"' in (results / "report.html").read_text()

    # its config section is validated like the built-in ones, and it is an allowed experiment
    cfg["toy"] = {"greting": "hi"}
    bad = run_snakemake(work, cfg, "-n", check=False)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "key 'toy': Additional properties" in out and "(allowed keys: greeting)" in out
    cfg["toy"] = {}
    cfg["variants"]["base"]["experiments"] = ["kv", "toyy"]
    bad = run_snakemake(work, cfg, "-n", check=False)
    out = bad.stdout + bad.stderr
    assert bad.returncode != 0 and "allowed: kv, toy, loadtest, prefix, accuracy" in out, out[-2000:]
