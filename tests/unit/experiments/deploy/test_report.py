"""The deployments' report side (worthit.experiments.deploy.report): the hooks through which the report core
builds, shows and prints the recommended deployments without naming them."""

from __future__ import annotations

import io
import shlex
from pathlib import Path
from typing import Any

from rich.console import Console

from worthit.experiments.deploy.report import EXPERIMENT, deployment_blocks, figure_text
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS, REPORT_TOKEN_COST, REPORT_VALIDATION
from worthit.report import build, experiments, terminal
from worthit.report.views import View

CMD = ["vllm", "serve", "m", "--max-num-seqs", "16", "--kv-cache-dtype", "fp8"]
DEPLOYMENT = {
    "scenario": "latency",
    "status": "ok",
    "variant": "fp8",
    "command": shlex.join(CMD),
    "concurrency": 16,
    "slo_ttft_ms": 500.0,
    "slo_tpot_ms": 25.0,
    "chosen_by": "max-num-seqs 16: the highest level meeting the SLO",
    **{"tpot_ms_p99": 20.0, "tpot_ms_p99_n": 48, "tpot_ms_p99_ci95_low": 19.0, "tpot_ms_p99_ci95_high": 21.0},
}
VALIDATION = {
    "scenario": "latency",
    "quantity": "TPOT P99",
    "measured": 23.5,
    "measured_n": 48,
    "measured_ci95_low": 22.0,
    "measured_ci95_high": 25.0,
    "outcome": "miss",
}


def test_the_deployments_are_registered_as_the_report_core_asks() -> None:
    assert experiments.REGISTRY[EXPERIMENT.name] is EXPERIMENT
    # the validation needs the deployments served: the decision's tables leave it to the page
    assert any(t is REPORT_VALIDATION for t in experiments.after_decision())
    assert not any(t is REPORT_VALIDATION for t in build.DECISION_TABLES)
    assert any(t is REPORT_DEPLOYMENTS for t in build.DECISION_TABLES)
    # the terminal prints the deployments before what a token costs
    assert [t.name for t in terminal.summary_tables()] == [
        t.name for t in (REPORT_DEPLOYMENTS, REPORT_VALIDATION, REPORT_TOKEN_COST)
    ]


def test_the_deployments_are_chosen_from_the_verdicts(results: Path, cfg: dict[str, Any]) -> None:
    r = build.from_dir(cfg, results)
    order = [v.table.name for v in r.views]
    assert order.index("report_verdicts") < order.index(REPORT_DEPLOYMENTS.name) < order.index("report_comparison")
    assert {d["scenario"] for d in r.rows(REPORT_DEPLOYMENTS)} == {"latency", "throughput"}
    assert r.rows(REPORT_VALIDATION) == []  # nothing served yet


def test_a_promise_without_an_interval_says_what_it_rests_on() -> None:
    row = {"interval_basis": "single run", "ttft_ms_p99": 1661.54, "ttft_ms_p99_n": 7, "tpot_ms_p99": 217.1}
    row |= {"tpot_ms_p99_n": 32, "tpot_ms_p99_ci95_low": 199.2, "tpot_ms_p99_ci95_high": 236.8}
    assert figure_text(row, "ttft_ms_p99", "ms") == "1,661.5 ms [no interval: n=7, single run]"
    assert figure_text(row, "tpot_ms_p99", "ms") == "217.1 ms [199.2, 236.8]"


def test_a_validated_deployment_shows_what_serving_it_measured_beside_the_promise() -> None:
    views = [View(REPORT_DEPLOYMENTS, "d", "", [], [DEPLOYMENT]), View(REPORT_VALIDATION, "v", "", [], [VALIDATION])]
    (block,) = deployment_blocks(views)
    assert experiments.commands(views) == [block]  # what the page shows under the decision
    assert block["title"] == "latency-first: fp8 at concurrency 16" and block["validated"]
    assert shlex.split(block["command"].replace("\\\n", " ")) == CMD
    assert block["command"].count("\\\n") == 2  # one flag a line
    (fig,) = block["figures"]
    assert fig["promised"].startswith("20.0 [19.0, 21.0] n=48") and fig["measured"].startswith("23.5 [22.0, 25.0]")
    assert (fig["outcome"], fig["badge"]) == ("miss", "bad")
    assert block["slo"] == "P99 TTFT \u2264 500 ms, P99 TPOT \u2264 25 ms"


def test_the_terminal_prints_a_validated_deployment_from_its_stored_rows() -> None:
    out = io.StringIO()
    stored = {"deployments": [DEPLOYMENT], "validation": [VALIDATION]}  # by short name, as print_results reads them
    terminal.show_summary([], stored, console=Console(file=out, width=200))
    text = out.getvalue()
    assert "Deployments\nlatency-first: fp8 at concurrency 16\n" in text and f"  {shlex.join(CMD)}\n" in text
    assert "promises TPOT P99 20.0 ms [19.0, 21.0] (measured 23.5 ms [22.0, 25.0]: miss)" in text
    assert "What a token costs" not in text  # no rows of it: nothing printed
