"""worthit tune: the Optuna search: proposals, outcomes the sampler learns from, no repeats, resume, seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from worthit.errors import InputError
from worthit.tune.search import (
    FAILED,
    MEASURED,
    PRUNED,
    Candidate,
    Outcome,
    TuneSearch,
    candidate_id,
    distributions,
)
from worthit.tune.space import Choices, Range, TuneSection, parse

SPACE = {
    "max-num-seqs": Range(8, 64, integer=True, step=8),
    "gpu-memory-utilization": Range(0.85, 0.95, integer=False),
    "enable-chunked-prefill": Choices((True, False)),
}


def section(space: dict | None = None, per_round: int = 4, seed: int = 7) -> TuneSection:
    s = parse({"variants": {"a": {}}, "tune": {"per_round": per_round, "seed": seed}})
    return TuneSection(**{**s.__dict__, "space": dict(space or SPACE)})


def figure(v: dict) -> dict[str, float]:
    """A made-up measurement: throughput grows with max-num-seqs, latency load with chunked prefill."""
    return {"throughput": 10.0 * v["max-num-seqs"], "latency": 8.0 + 4 * bool(v["enable-chunked-prefill"])}


def run_rounds(search: TuneSearch, rounds: int, start: int = 0) -> list[Candidate]:
    out = []
    for r in range(start, start + rounds):
        for c in search.propose(r):
            search.record(c, Outcome.measured(figure(c.values)))
            out.append(c)
    return out


def test_candidate_ids_are_stable_and_order_free() -> None:
    a = candidate_id({"x": 1, "y": True})
    assert a == candidate_id({"y": True, "x": 1}) and a != candidate_id({"x": 2, "y": True}) and len(a) == 12


def test_distributions_follow_the_space() -> None:
    d = distributions(section())
    assert type(d["max-num-seqs"]).__name__ == "IntDistribution" and d["max-num-seqs"].step == 8
    assert type(d["gpu-memory-utilization"]).__name__ == "FloatDistribution"
    assert d["enable-chunked-prefill"].choices == (True, False)


def test_a_round_proposes_per_round_candidates_across_the_scenarios(tmp_path: Path) -> None:
    s = TuneSearch(section(), tmp_path / "j.log")
    cands = s.propose(0)
    assert len(cands) == 4 and {c.scenario for c in cands} == {"latency", "throughput"}
    assert len({c.id for c in cands}) == 4
    assert all(8 <= c.values["max-num-seqs"] <= 64 and c.values["max-num-seqs"] % 8 == 0 for c in cands)


def test_same_seed_same_candidates(tmp_path: Path) -> None:
    a = run_rounds(TuneSearch(section(seed=3), tmp_path / "a.log"), 3)
    b = run_rounds(TuneSearch(section(seed=3), tmp_path / "b.log"), 3)
    c = run_rounds(TuneSearch(section(seed=4), tmp_path / "c.log"), 3)
    assert [x.values for x in a] == [x.values for x in b]
    assert [x.values for x in a] != [x.values for x in c]


def test_adjacent_seeds_draw_unrelated_candidates(tmp_path: Path) -> None:
    # the samplers were seeded with seed + trials so far: seed s + 1 then asked what seed s asks one trial
    # later, so tunes (and replays) over seeds 0, 1, 2, ... proposed the same candidates shifted by one
    for seed in (0, 3):
        a = run_rounds(TuneSearch(section(seed=seed), tmp_path / f"{seed}a.log"), 2)
        b = run_rounds(TuneSearch(section(seed=seed + 1), tmp_path / f"{seed}b.log"), 2)
        assert not {x.id for x in a} & {x.id for x in b}


def test_an_interrupted_tune_resumes_and_never_measures_a_candidate_twice(tmp_path: Path) -> None:
    journal = tmp_path / "tune.log"
    whole = run_rounds(TuneSearch(section(seed=5), tmp_path / "whole.log"), 3)
    first = run_rounds(TuneSearch(section(seed=5), journal), 1)
    pending = TuneSearch(section(seed=5), journal).propose(1)  # round 1 proposed, then the tune is interrupted
    again = TuneSearch(section(seed=5), journal)
    assert [c.id for c in again.propose(1)] == [c.id for c in pending]  # the same round, not re-asked
    for c in pending:
        again.record(c, Outcome.measured(figure(c.values)))
        again.record(c, Outcome.measured(figure(c.values)))  # a second record is ignored
    rest = run_rounds(TuneSearch(section(seed=5), journal), 1, start=2)
    resumed = [*first, *pending, *rest]
    assert [c.values for c in resumed] == [c.values for c in whole]
    ids = [c.id for c in resumed]
    assert len(ids) == len(set(ids))
    trace = TuneSearch(section(seed=5), journal).trace()
    assert len(trace) == 2 * len(ids)  # each candidate told to both scenarios' studies, once


def test_a_small_space_is_exhausted_without_repeats(tmp_path: Path) -> None:
    small = {"max-num-seqs": Range(8, 16, integer=True, step=8), "enable-chunked-prefill": Choices((True, False))}
    s = TuneSearch(section(small, per_round=3), tmp_path / "j.log")
    seen = run_rounds(s, 3)
    assert sorted(c.id for c in seen) == sorted({c.id for c in seen}) and len(seen) == 4
    assert s.propose(3) == []


def test_failed_and_pruned_outcomes_are_recorded_with_their_reasons(tmp_path: Path) -> None:
    s = TuneSearch(section(), tmp_path / "j.log")
    a, b, c, d = s.propose(0)
    s.record(a, Outcome.failed("CUDA out of memory at start"))
    s.record(b, Outcome.pruned("pruned by the plan (predicted KV pool 1,000 tokens ...)"))
    s.record(c, Outcome.measured({"throughput": 500.0, "latency": 16.0}))
    s.record(d, Outcome.measured({"throughput": 700.0}))  # no load met the SLO: latency 0
    by = {(t["candidate_id"], t["scenario"]): t for t in s.trace()}
    assert by[(a.id, "throughput")]["status"] == FAILED and "out of memory" in by[(a.id, "throughput")]["reason"]
    assert by[(b.id, "latency")]["status"] == PRUNED and by[(b.id, "latency")]["value"] is None
    assert by[(c.id, "latency")]["status"] == MEASURED and by[(c.id, "latency")]["value"] == 16.0
    assert by[(d.id, "latency")]["value"] == 0.0
    assert s.best("throughput") == (d.values, 700.0) and s.best("latency") == (c.values, 16.0)
    assert s.finished() == {a.id: FAILED, b.id: PRUNED, c.id: MEASURED, d.id: MEASURED}
    assert all(x.id not in {a.id, b.id, c.id, d.id} for x in s.propose(1))


def test_an_outcome_of_a_candidate_never_proposed_is_added(tmp_path: Path) -> None:
    s = TuneSearch(section(), tmp_path / "j.log")
    c = Candidate({"max-num-seqs": 16, "gpu-memory-utilization": 0.9, "enable-chunked-prefill": True}, round=0)
    s.record(c, Outcome.measured({"throughput": 1.0, "latency": 2.0}))
    assert s.finished() == {c.id: MEASURED}


def test_numeric_choices_are_searched_in_their_order_and_read_back_as_values(tmp_path: Path) -> None:
    """max-num-seqs: [16, 1, 4, 8, 2] is an ordered dimension to the sampler (the index into 1, 2, 4, 8, 16):
    TPE models neighbouring values alike, as it cannot for a categorical's unrelated labels. Candidates,
    the trace and the best carry the values themselves, and a resumed search reads them back the same."""
    space = {"max-num-seqs": Choices((16, 1, 4, 8, 2)), "enable-chunked-prefill": Choices((True, False))}
    d = distributions(section(space))
    assert type(d["max-num-seqs"]).__name__ == "IntDistribution" and (
        d["max-num-seqs"].low,
        d["max-num-seqs"].high,
    ) == (0, 4)
    assert type(d["enable-chunked-prefill"]).__name__ == "CategoricalDistribution"  # booleans stay labels
    s = TuneSearch(section(space, per_round=3), tmp_path / "j.log")
    done = run_rounds(s, 3)
    assert len({c.id for c in done}) == len(done) == 9
    assert all(c.values["max-num-seqs"] in (1, 2, 4, 8, 16) for c in done)
    assert {c.id for c in done} == {r["candidate_id"] for r in s.trace()}
    assert all(r["values"]["max-num-seqs"] in (1, 2, 4, 8, 16) for r in s.trace())
    best = s.best("throughput")
    assert best is not None and best[0]["max-num-seqs"] == max(c.values["max-num-seqs"] for c in done)
    again = TuneSearch(section(space, per_round=3), tmp_path / "j.log")  # resumed from the journal
    assert again.finished() == s.finished() and again.best("throughput") == best
    assert {c.id for c in again.propose(3)}.isdisjoint({c.id for c in done})


def test_a_journal_drawn_from_another_space_is_refused_with_what_to_do(tmp_path: Path) -> None:
    space = {"max-num-seqs": Choices((1, 2, 4)), "enable-chunked-prefill": Choices((True, False))}
    s = TuneSearch(section(space, per_round=2), tmp_path / "j.log")
    run_rounds(s, 1)
    TuneSearch(section(space, per_round=2), tmp_path / "j.log")  # the same space resumes
    wider = {**space, "max-num-seqs": Choices((1, 2, 4, 8))}
    with pytest.raises(
        InputError,
        match=r"j.log: the tune's search state was drawn from another space \(key "
        r"'tune.space.max-num-seqs'.*Remove this file to search the space afresh",
    ):
        TuneSearch(section(wider, per_round=2), tmp_path / "j.log")


def test_a_journal_record_cut_short_is_dropped_and_the_search_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a tune killed while Optuna appended a record left half a line; the next record went onto it, and Optuna
    # failed with an AttributeError on every later start
    journal = tmp_path / "tune.log"
    first = run_rounds(TuneSearch(section(seed=5), journal), 1)
    TuneSearch(section(seed=5), journal).propose(1)  # round 1 asked ...
    journal.write_bytes(journal.read_bytes()[:-9])  # ... and its last record cut short
    again = TuneSearch(section(seed=5), journal)
    assert "its last record was cut short (" in capsys.readouterr().err
    assert journal.read_bytes().endswith(b"\n")
    rest = run_rounds(again, 2, start=1)
    ids = [c.id for c in [*first, *rest]]
    assert len(rest) == 2 * 4 and len(ids) == len(set(ids))  # every round whole, nothing measured twice


def test_a_journal_that_cannot_be_replayed_is_named_with_what_to_do(tmp_path: Path) -> None:
    journal = tmp_path / "tune.log"
    run_rounds(TuneSearch(section(seed=5), journal), 1)
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join([*lines[:3], b'{"op_code": 5, "worker_id": "x"}\n', *lines[3:]]))
    with pytest.raises(InputError, match=r"tune.log: the tune's search state cannot be read .*Remove this file"):
        TuneSearch(section(seed=5), journal)
