"""A verdict names the workload it rests on: an optimisation whose effect depends on what is generated
(speculative decoding) is judged on its real-text levels where it has any; its random-token levels are shown
beside the verdict, said as such, and flagged where the model loops (docs/verdicts.md, "Which workload")."""

from __future__ import annotations

from pathlib import Path

from worthit import schemas
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.loadgen.workloads import KINDS, REAL_TEXT_KINDS, real_text
from worthit.report.decide import (
    ADOPT,
    LATENCY,
    REJECT,
    UNDETERMINED,
    Check,
    Comparison,
    Evidence,
    Setting,
    Workload,
    decide,
    judged_on,
)
from worthit.report.headline import LOOPS, deciding, effect_text, workload_line
from worthit.report.measure import Measure, runs_basis
from worthit.report.rules import Rules

RULES = Rules()
RANDOM = Workload("random tokens", False, loops=True)
SHAREGPT = Workload("sharegpt", True, loops=False)


def _m(value: float, rel: float = 0.02) -> Measure:
    return Measure(value, 3, value * (1 - rel), value * (1 + rel), runs_basis(3))


def _e2e(setting: Setting, without: float, with_: float) -> Comparison:
    return Comparison("E2E P50", "ms", _m(without), _m(with_), False, LATENCY, setting)


def _grid(c: int) -> Setting:
    return Setting.concurrency(c, RANDOM)


def _level(c: int) -> Setting:
    return Setting(f"workload level sharegpt/conc~{c}", "workload level", workload=SHAREGPT)


def _speculative(*, real: bool = True, content_dependent: bool = True) -> Evidence:
    """Three times faster on random tokens (where the model loops), no faster on ShareGPT prompts."""
    comps = [_e2e(_grid(1), 900.0, 300.0), _e2e(_grid(4), 1200.0, 550.0)]
    checks = []
    if real:
        comps += [_e2e(_level(1), 900.0, 895.0), _e2e(_level(4), 1200.0, 1190.0)]
        # an experiment's check at a level names the level, not its workload (the specdec rule of thumb)
        checks.append(Check(LATENCY, Setting("workload level sharegpt/conc~4", "workload level"), UNDETERMINED, "x"))
    return Evidence(
        "spec_ngram",
        "speculative decoding (ngram, k=4)",
        comparisons=comps,
        checks=checks,
        lossless=True,
        content_dependent=content_dependent,
    )


def test_real_text_is_a_property_of_the_workload_kind() -> None:
    assert set(REAL_TEXT_KINDS) == {"sharegpt", "jsonl"}
    assert [k for k in KINDS if real_text(k)] == list(REAL_TEXT_KINDS)
    assert not real_text("conversation") and not real_text("trace") and not real_text(None)


def test_a_speculative_variant_is_not_adopted_on_random_tokens_when_real_text_shows_no_gain() -> None:
    e = _speculative()
    v = decide(e, RULES)
    assert v.outcome == REJECT, v.reason  # no benefit of at least min_speedup on ShareGPT prompts
    assert "judged on real text (sharegpt)" in v.reason
    # the same figures without the workload rule adopt on the random tokens
    assert decide(_speculative(content_dependent=False), RULES).outcome == ADOPT
    # the check at a ShareGPT level stays with the verdict; nothing on the random grid is judged
    on = judged_on(e)
    assert {c.setting.label for c in on.comparisons} == {
        "workload level sharegpt/conc~1",
        "workload level sharegpt/conc~4",
    }
    assert len(on.checks) == 1


def test_its_headline_names_the_sharegpt_figure_and_the_line_names_both_workloads() -> None:
    e = _speculative()
    v = decide(e, RULES)
    d = deciding(v, e, RULES)
    assert d is not None
    assert "sharegpt" in d[0].setting.label and "concurrency 1" not in effect_text(*d)
    line = workload_line(v, e, RULES)
    real, synthetic = line.split("; ")
    assert real.startswith("sharegpt (real text): no gain, E2E P50")
    assert "at concurrency 1" in real or "at concurrency 4" in real
    assert synthetic.startswith("random tokens: adopt, E2E P50 \u221267 %")
    assert "the drafter predicts the model's loops, not your traffic" in synthetic
    assert synthetic.endswith("(shown, not judged)")
    assert [w.judged for w in v.by_workload] == [True, False]


def test_measured_on_random_tokens_only_it_says_so() -> None:
    e = _speculative(real=False)
    v = decide(e, RULES)
    assert v.outcome == ADOPT
    assert "measured on random tokens only" in v.reason and "sharegpt or jsonl" in v.reason
    assert workload_line(v, e, RULES).startswith("random tokens: adopt")


def test_a_content_free_optimisation_is_judged_on_every_workload_and_said_per_workload() -> None:
    e = _speculative(content_dependent=False)
    v = decide(e, RULES)
    assert v.outcome == ADOPT
    assert [w.workload.name for w in v.by_workload] == ["sharegpt", "random tokens"]
    assert all(w.judged for w in v.by_workload)
    assert "(shown, not judged)" not in workload_line(v, e, RULES)
    assert decide(Evidence("x", comparisons=[_e2e(_grid(1), 900.0, 300.0)]), RULES).by_workload == ()


def test_the_report_tags_each_level_with_what_it_sent_and_whether_it_loops(tmp_path: Path) -> None:
    """On the committed embedded default, the baseline's chat level copied to spec_ngram (every response a
    loop): the verdict's line names each workload, judges on ShareGPT's real text, shows the two synthetic ones
    with the chat's loops flagged; without the real-text levels it asks for real text."""
    import shutil

    from tests.unit.experiments.specdec.test_specdec import _chat_level_on_spec, _report

    looping = _report(_chat_level_on_spec(tmp_path / "a", 40.0, 160.0, 150.0, share=0.9))
    v = looping.verdicts["spec_ngram"]
    judged = {w.workload.name: w.judged for w in v.by_workload}
    assert judged == {"sharegpt": True, "random tokens": False, "chat": False}
    chat = next(w.workload for w in v.by_workload if w.workload.name == "chat")
    assert chat.loops is True and not chat.real_text  # a conversation workload is generated random tokens
    row = next(r for r in looping.rows(schemas.REPORT_VERDICTS) if r["variant"] == "spec_ngram")
    assert row["by_workload"].startswith("sharegpt (real text): ")
    assert "chat (random tokens): " in row["by_workload"] and LOOPS in row["by_workload"]
    assert "(shown, not judged)" in row["by_workload"]
    synthetic = _chat_level_on_spec(tmp_path / "c", 40.0, 160.0, 150.0, share=0.9)
    for level in synthetic.glob("variant~*/load/sharegpt"):
        shutil.rmtree(level)
    only = _report(synthetic)
    assert sorted(w.workload.name for w in only.verdicts["spec_ngram"].by_workload) == ["chat", "random tokens"]
    row = next(r for r in only.rows(schemas.REPORT_VERDICTS) if r["variant"] == "spec_ngram")
    assert "no real-text level measured" in row["by_workload"]
    plain_results = _chat_level_on_spec(tmp_path / "b", 40.0, 160.0, 150.0, share=0.1)
    # the baseline's own chat replies loop on this model (median repeated 4-gram share 0.62): made plain too
    for f in plain_results.glob("variant~baseline/load/chat/*.parquet"):
        res = schemas.read(f, LOAD_REQUESTS)
        rows = [{**r, "repeated_ngram_share": 0.1} for r in res.table.to_pylist()]
        schemas.write(f, LOAD_REQUESTS, rows, metadata=res.metadata)
    plain = _report(plain_results)
    chat = next(w.workload for w in plain.verdicts["spec_ngram"].by_workload if w.workload.name == "chat")
    assert chat.loops is False
