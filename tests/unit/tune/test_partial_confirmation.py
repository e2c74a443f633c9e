"""An interrupted tune's confirmation, judged on the fresh starts it measured, serving nothing
(``worthit tune --no-confirm``). The data is the real tune of examples/h200-qwen/tune/ (Qwen2.5-Coder-1.5B on an
H100; its per-request rows in main's history, read from their compact extract on main: tests/evidence.py):
vLLM's defaults measured on both of their fresh starts, the rounds' best on one of its two."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import evidence
from worthit.config import ROOT, load
from worthit.tune.candidates import start_variant
from worthit.tune.confirm import DEFAULTS
from worthit.tune.fresh_starts import confirm
from worthit.tune.rounds import TuneRun
from worthit.tune.search import TuneSearch
from worthit.tune.space import LATENCY, THROUGHPUT, parse
from worthit.tune.summary import write

CONFIG = ROOT / "config/studies/h200-qwen2.5-coder-tune.yaml"
BEST = "2e1f648e2f39"  # max-num-seqs 107, max-num-batched-tokens 5954: both scenarios' best of the rounds


def _tune(tmp_path: Path) -> tuple[dict, TuneSearch, Path]:
    cfg = load(CONFIG)
    results = tmp_path / "results" / f"{cfg['study']}-tune"
    shutil.copytree(evidence.compact("h200-qwen/tune") / "results", results)
    (results / "tune" / "confirmation.parquet").unlink()
    search = TuneSearch(parse(cfg, str(CONFIG)), results / "tune" / "journal.log", study_name=str(cfg["study"]))
    return cfg, search, results


def test_an_interrupted_confirmation_is_judged_on_its_starts_so_far_and_serves_nothing(tmp_path: Path) -> None:
    cfg, search, results = _tune(tmp_path)
    section = parse(cfg, str(CONFIG))
    run = confirm(cfg, search, section, source=str(CONFIG), workdir=tmp_path, serve=False, say=lambda _: None)
    assert (run.found, run.expected, run.starts) == (3, 4, 0)
    assert not (tmp_path / ".snakemake").exists()  # no workflow ran
    by = {sc.scenario: sc for sc in run.scenarios}
    assert set(by) == {LATENCY, THROUGHPUT}
    for sc in by.values():
        assert sc.decision is None  # one start of the candidate: no interval, so no winner and no tie
        assert sc.note == "no candidate of the rounds measured on two fresh starts or more (the most: 1 of 2)"
        assert sc.ids[DEFAULTS] != BEST and BEST in sc.ids.values()
    tput = by[THROUGHPUT].runs
    assert sorted(tput[DEFAULTS]) == pytest.approx([12696.5, 13836.8], abs=0.1)
    assert [len(r) for n, r in tput.items() if n != DEFAULTS] == [1]
    assert run.path == results / "tune" / "confirmation.parquet" and run.path.exists()

    summary = write(
        cfg, TuneRun(section, best={s: search.best(s) for s in section.scenarios}, search=search), run, tmp_path
    ).read_text()
    assert summary.count("not confirmed: no candidate of the rounds measured on two fresh starts") == 2
    assert "| vLLM defaults | 2 | 13,266.7 [" in summary  # each side's starts, the defaults' interval beside
    assert "Trace: `trace.parquet`" in summary


def test_without_a_fresh_start_on_disk_nothing_is_judged_or_written(tmp_path: Path) -> None:
    cfg, search, results = _tune(tmp_path)
    section = parse(cfg, str(CONFIG))
    starts = list(results.glob("variant~tune_*_start*"))
    assert len(starts) == 4 and start_variant(BEST, 2) in {d.name.split("~", 1)[1] for d in starts}
    for d in starts:
        shutil.rmtree(d)
    run = confirm(cfg, search, section, source=str(CONFIG), workdir=tmp_path, serve=False, say=lambda _: None)
    assert (run.found, run.expected) == (0, 4)
    assert run.path is None and not (results / "tune" / "confirmation.parquet").exists()
