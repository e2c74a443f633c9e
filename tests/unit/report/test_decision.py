"""The report opens with the decision (worthit.report.headline, render, terminal): one row per optimisation
with its verdict, the effect as measured with its interval, the accuracy cost, the effort and one line of why;
controls and helpers under the table; a small figure each; the deployments as commands; every other section
folded. Built on the recorded embedded-default results (tests/fixtures/embedded-default)."""

from __future__ import annotations

import html
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.embedded_results import FIXTURE, copy_variant
from worthit import schemas
from worthit.config import validate
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS
from worthit.report import build, headline, terminal
from worthit.report.decide import UNDETERMINED, Comparison, Setting
from worthit.report.measure import Measure
from worthit.report.regimes import judge
from worthit.report.render import DECISION_HEADERS, html_page

ROOT = Path(__file__).resolve().parents[3]


def _with_control_and_helper(results: Path, cfg: dict[str, Any]) -> dict[str, Any]:
    """The fixture with a control (the baseline measured again: its results copied) and a draft model served
    alone for a speculative variant (both configured, the latter two not run)."""
    copy_variant(results / "variant~baseline", results / "variant~baseline_again")
    raw = yaml.safe_load((FIXTURE / "config.yaml").read_text())
    raw["models"]["draft-model"] = {"source": "hf:HuggingFaceTB/SmolLM2-135M-Instruct"}
    raw["variants"]["baseline_again"] = {"model": "smollm2-135m", "description": "the baseline measured again"}
    raw["variants"]["spec"] = {
        "model": "smollm2-135m",
        "engine_args": {"speculative-config": {"method": "draft_model", "model": "x", "num_speculative_tokens": 3}},
    }
    raw["variants"]["draft"] = {"model": "draft-model", "experiments": ["loadtest"]}
    raw["specdec"] = {"draft_variants": {"spec": "draft"}}
    return validate(raw)


def _m(value: float, low: float, high: float) -> Measure:
    return Measure(value, 3, low, high, "3 runs")


# ------------------------------------------------------------------------------- the wording
def test_the_effect_reads_as_the_change_with_its_interval_in_percent() -> None:
    c = Comparison("TPOT P50", "ms", _m(10.0, 9.5, 10.5), _m(5.0, 4.8, 5.2), False, setting=Setting.concurrency(1))
    iv = headline.change_interval_pct(c)
    assert iv is not None and iv[0] < -50 < iv[1] < 0  # halved: -50 %, the interval on both sides of it
    text = headline.effect_text(c, judge(c, headline_rules())[0])
    assert text == f"TPOT P50 \u221250 % at concurrency 1 [{headline.signed(iv[0])}, {headline.signed(iv[1])} %]"


def test_an_undetermined_effect_says_so_and_why() -> None:
    c = Comparison(
        "TPOT P50",
        "ms",
        _m(10.0, 9.0, 11.0),
        _m(11.6, 10.0, 13.0),
        False,
        setting=Setting.concurrency(1),
        spread=1.58,
        spread_source="control c",
    )
    finding = judge(c, headline_rules())[0]
    assert finding == UNDETERMINED
    text = headline.effect_text(c, finding)
    assert text.startswith("TPOT P50 +16 % at concurrency 1 [") and text.endswith(
        "undetermined (machines differ up to \u00d71.58)"
    )


def test_throughput_changes_read_the_right_way_round() -> None:
    c = Comparison("output tok/s", "tok/s", _m(100.0, 95.0, 105.0), _m(150.0, 140.0, 160.0), True)
    iv = headline.change_interval_pct(c)
    assert iv is not None and iv[0] < 50 < iv[1]
    assert headline.effect_text(c).startswith("output tok/s +50 % [+")


def headline_rules() -> Any:
    from worthit.report.rules import Rules

    return Rules()


# ------------------------------------------------------------------------------- the rows
def test_each_optimisation_has_a_verdict_an_effect_an_accuracy_cost_and_a_short_why(
    results: Path, cfg: dict[str, Any]
) -> None:
    r = build.from_dir(cfg, results)
    (v,) = r.rows(schemas.REPORT_VERDICTS)
    assert v["role"] == headline.OPTIMISATION
    assert v["effect"].startswith(("E2E", "TTFT", "TPOT", "output", "goodput", "KV"))
    assert re.search(r"[+\u2212]?\d[\d,]* % .*\[[+\u2212]?\d", v["effect"])  # the change and its interval
    assert v["accuracy_summary"] == v["accuracy_outcome"]  # no accuracy measured: the decision says why
    assert 0 < len(v["why"]) <= headline.WHY_MAX and len(v["reason"]) > len(v["why"])


def test_controls_and_helpers_are_not_rows_of_the_decision_table(results: Path, cfg: dict[str, Any]) -> None:
    cfg = _with_control_and_helper(results, cfg)
    r = build.from_dir(cfg, results)
    roles = {x["variant"]: x["role"] for x in r.rows(schemas.REPORT_VERDICTS)}
    assert roles == {
        "no_prefix_cache": headline.OPTIMISATION,
        "baseline_again": headline.ROLE_CONTROL,
        "spec": headline.OPTIMISATION,
        "draft": headline.HELPER,
    }
    page = html_page(r.ctx, r.views, {}, build.decision_figures(r))
    table = page[page.index('<table id="decision"') : page.index("</table>", page.index('<table id="decision"'))]
    assert 'id="row-no_prefix_cache"' in table and 'id="row-spec"' in table
    assert "baseline_again" not in table and 'id="row-draft"' not in table
    checked = html.unescape(page[page.index('id="checked"') :][:3000])
    assert "<b>baseline_again</b> (control): baseline_again measured baseline's configuration again" in checked
    assert "<b>draft</b> (helper): draft serves the draft model of spec alone, to measure \u03b3" in checked


def test_the_page_opens_with_the_decision_then_figures_then_deployments_then_folded_detail(
    results: Path, cfg: dict[str, Any], tmp_path: Path
) -> None:
    r = build.from_dir(cfg, results)
    page = html_page(r.ctx, r.views, build.write_figures(r, tmp_path), build.decision_figures(r))
    order = [page.index(s) for s in ('id="decision"', 'id="checked"', 'id="small-no_prefix_cache"', 'id="deployments"')]
    assert order == sorted(order) and order[-1] < page.index('id="detail"')
    head = page[page.index("<thead>") : page.index("</thead>")]
    assert re.findall(r"<th>(.*?)</th>", head) == list(DECISION_HEADERS) and len(DECISION_HEADERS) <= 7
    row = page[page.index('id="row-no_prefix_cache"') : page.index("</tr>", page.index('id="row-no_prefix_cache"'))]
    (v,) = r.rows(schemas.REPORT_VERDICTS)
    why = row[row.index('class="why"') :]
    assert why.index("<summary>") < why.index(html.escape(v["why"])) < why.index("</summary>")
    more = why[why.index('<div class="more">') :]  # one click away: the full reason, what would settle it
    assert html.escape(v["reason"]) in more and why.index("</summary>") < why.index('<div class="more">')
    assert "What would settle it:" in why or not v["settle"]
    # every section after the deployments folds, each with a one-line summary in its heading
    detail = page[page.index('id="detail"') :]
    sections = re.findall(r'<details class="section"[^>]*><summary>([^<]+)<span class="line">([^<]*)</span>', detail)
    titles = [t for t, _ in sections]
    assert {"Verdicts", "Without vs with each optimisation", "Provenance"} <= set(titles)
    assert all(line.strip() for _, line in sections) and '<details class="section" open' not in page
    # the comparison table is grouped per optimisation, each group folded
    comp = detail[detail.index('id="h-report_comparison"') :]
    comp = comp[: comp.index('<details class="section"', 10)]
    assert comp.count('<details class="group">') == 1 and "no_prefix_cache: prefix caching (on vs off)" in comp
    # one small figure per optimisation: with and without, intervals as bands (inline SVG, no external file)
    fig = page[page.index('id="small-no_prefix_cache"') :]
    assert fig.index("<svg") < fig.index("</figure>") and "without (no_prefix_cache)" in fig
    assert not re.search(r"<(script|link|img)\b[^>]*(src|href)=\"(https?:)?//", page)


def test_the_deployments_are_commands_to_copy_with_what_they_promise(results: Path, cfg: dict[str, Any]) -> None:
    r = build.from_dir(cfg, results)
    page = html_page(r.ctx, r.views, {}, {})
    dep = page[page.index('id="deployments"') : page.index('id="detail"')]
    lat = next(d for d in r.rows(REPORT_DEPLOYMENTS) if d["scenario"] == "latency")
    block = dep[dep.index("latency-first:") :]
    cmd = re.search(r'<pre class="cmd"><code>(.*?)</code></pre>', block, re.S)
    assert cmd is not None
    assert shlex.split(html.unescape(cmd.group(1)).replace("\\\n", " ")) == list(lat["argv"])
    assert "TTFT P99" in block and "promised" in block and "Not validated yet" in block


# ------------------------------------------------------------------------------- the terminal
def test_worthit_report_prints_the_decision_table_the_deployments_and_the_page(
    results: Path, cfg: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from worthit.cli import main

    conf = tmp_path / "study.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    assert main(["report", "--results", str(results), "--configfile", str(conf)]) == 0
    out = capsys.readouterr().out
    (v,) = schemas.read(results / "report" / "verdicts.parquet", schemas.REPORT_VERDICTS).table.to_pylist()
    assert "What to turn on" in out and "prefix caching (on vs off)" in out and v["outcome"] in out
    assert v["effect"].split(" [")[0].split()[0] in out
    assert "latency-first:" in out and "vllm serve" in out and "promises TTFT P99" in out
    assert out.rstrip().endswith(f"report: {results / 'report.html'}")
    # the end of a workflow run prints the same from the stored tables, once the run wrote the page
    assert terminal.print_results(results, since=0.0)
    assert capsys.readouterr().out.count("What to turn on") == 1
    page = results / "report.html"
    assert not terminal.print_results(results, since=page.stat().st_mtime + 60)
    assert capsys.readouterr().out == ""


def test_a_failed_or_inapplicable_optimisation_says_nothing_was_measured_and_why(cfg: dict[str, Any]) -> None:
    from worthit.config import Study
    from worthit.report.context import Context
    from worthit.report.data import StudyResults
    from worthit.report.decide import Evidence, decide

    ctx = Context.of(Study(cfg), StudyResults(variants={}))
    pair = ctx.pair("no_prefix_cache")
    for status, effect in (("failed", "not measured (failed)"), ("not_applicable", "not measured (not applicable)")):
        e = Evidence("no_prefix_cache", pair.optimisation, status, "the server ran out of memory at start")
        h = headline.headline(ctx, pair, decide(e, ctx.rules), e)
        assert (h.role, h.effect, h.accuracy) == (headline.OPTIMISATION, effect, "\u2014")
        assert h.why == "the server ran out of memory at start" and h.comparison is None


def test_tables_md_opens_with_the_decision_too(results: Path, cfg: dict[str, Any]) -> None:
    from worthit.report.render import markdown_page

    r = build.from_dir(cfg, results)
    page = markdown_page(r.ctx, r.views)
    (v,) = r.rows(schemas.REPORT_VERDICTS)
    decision = page[page.index("## Decision") : page.index("## ", page.index("## Decision") + 3)]
    assert "| " + " | ".join(DECISION_HEADERS) + " |" in decision
    assert f"**{v['outcome']}**" in decision and v["effect"] in decision and v["why"] in decision
    assert page.index("## Decision") < page.index("## Verdicts")


def test_a_figure_at_one_setting_shows_the_two_sides_and_the_accuracy_against_its_bound() -> None:
    from worthit.report import plots

    one = plots.with_without(
        "output tok/s",
        "tok/s",
        "",
        [0.0],
        without=[_m(100.0, 95.0, 105.0)],
        with_=[_m(150.0, 140.0, 160.0)],
        labels=("a", "b"),
        accuracy=[("worthit_gsm", -1.0, (-2.5, 0.5), 3.0), ("worthit_arc", -4.0, None, 3.0)],
    )
    assert [t.get_text() for t in one.axes[0].get_xticklabels()] == ["without", "with"]
    assert [t.get_text() for t in one.axes[1].get_yticklabels()] == ["gsm", "arc"]
    assert any(abs(line.get_xdata()[0] + 3.0) < 1e-9 for line in one.axes[1].get_lines())  # the -3 pt bound
    svg = plots.svg_text(one)
    assert svg.startswith("<svg") and "accuracy change (pt)" in svg  # text as text: a small page
    swept = plots.with_without(
        "TTFT P50",
        "ms",
        "shared prefix",
        [1500.0, 4000.0],
        without=[_m(30, 28, 32)] * 2,
        with_=[_m(15, 14, 16)] * 2,
        labels=("a", "b"),
        accuracy_note="accuracy: not needed (lossless)",
    )
    assert swept.axes[0].get_xlabel() == "shared prefix (tokens)" and not swept.axes[1].axison


def test_the_terminal_prints_names_with_brackets_as_they_are_and_narrows_to_its_width() -> None:
    from rich.console import Console

    row = {
        "variant": "draft",
        "role": "optimisation",
        "optimisation": "qwen-0.5b [the draft model of spec, served alone for gamma]",
        "outcome": "reject",
        "effect": "TPOT P50 +20 % at concurrency 1 [+5, +40 %]",
        "accuracy_summary": "not measured",
        "effort": "low",
        "why": "latency-first reject at every concurrency measured",
    }
    wide, narrow = Console(width=200, record=True), Console(width=100, record=True)
    terminal.show_summary([row], {}, console=wide)
    terminal.show_summary([row], {}, console=narrow)
    text = wide.export_text()
    assert "[the draft" in text and "gamma]" in text and "\\[" not in text  # shown as named, not as markup
    assert "[+5, +40 %]" in text and "latency-first reject" in text
    assert "why" in text.split("\n")[2] and "latency-first reject" not in narrow.export_text()  # the page has it


def test_an_interval_bound_past_ten_thousand_percent_is_shown_as_such():
    """A 2-run level's simultaneous interval can reach millions of percent; the text says ">+10,000" instead,
    while a wide but meaningful bound (the draft model's +1,072 %) is shown as it is."""
    from worthit.report.headline import _bound

    assert _bound(181_572_670.0) == ">+10,000"
    assert _bound(1072.4) == "+1,072"
    assert _bound(-100.0) == "\u2212100"
