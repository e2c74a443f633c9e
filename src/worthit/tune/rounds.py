"""``worthit tune``: the search in rounds, each candidate measured as a variant of the tune's own study.

A round asks the search (:mod:`.search`, Optuna TPE per scenario, its journal the tune's memory) for
``per_round`` candidates, screens them with the plan's bounds (:mod:`.prune`: pruned candidates are recorded
with the prediction, never served), then writes the tune's study (:mod:`.candidates`),
``results/<study>-tune/tune/study.yaml``: the study's config with one variant per candidate served so far
(``tune_<id>``: the candidate's base variant with its flag values, experiments ``[loadtest]``). Snakemake
(:mod:`.driver`) measures the new candidates' load levels like any variant's: the study's levels and repeats,
a failure (a flag the build refuses, an OOM, a server that never answers) written as a failure record with its
reason, finished files never measured again, a cluster profile (``--profile``) running a round's candidates
side by side. What each candidate reached is read back from its files (:mod:`.reached`) and told to the
search:

* latency-first: the concurrency at which the SLO is reached, per GPU (0 when no level meets it): between the
  highest level whose P99 TTFT and P99 TPOT meet the SLO and the next one, where the P99s' ratio to their
  bounds crosses 1 (log-linear in concurrency); above the highest level, when every level meets it,
  extrapolated from the top two levels by at most one grid step. A figure that varies with the candidate, so
  that the confirmation separates candidates that differ and ties only those that do not
  (:func:`~.reached.slo_concurrency`);
* throughput-first: the most output tok/s among the levels whose P99 TPOT stays under ``decide.throughput_tpot_ms``,
  per GPU (0 when none does).

An interrupted tune resumes: the journal holds every candidate told and the round's pending ones (asked again
as they were), and Snakemake skips what is on disk. The budget (``tune.budget.server_starts``) counts the
candidates served; when it is spent the tune stops, and a larger budget resumes it. The trace is
``results/<study>-tune/tune/trace.parquet`` (:data:`~.tables.TUNE_TRACE`).
"""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from worthit import atomic, schemas
from worthit.config import Study
from worthit.errors import InputError
from worthit.experiments.loadtest.section import section as load_section
from worthit.plan.hardware import Hardware
from worthit.plan.shapes import ModelShape
from worthit.server import engine_flags
from worthit.tune.accuracy_gate import ACCEPTABLE, UNACCEPTABLE, AccuracyGate
from worthit.tune.accuracy_gate import FAILED as ACC_FAILED
from worthit.tune.candidates import derived_config, describe, gpus_of, tune_dir, variant_of
from worthit.tune.driver import NotRun, not_run_message, run_snakemake
from worthit.tune.prune import bound, candidate_args, screen, unservable
from worthit.tune.reached import THROUGHPUT_LOW, UNITS, gpu_minutes, load_files, not_run, outcome
from worthit.tune.search import FAILED, MEASURED, Candidate, Outcome, TuneSearch
from worthit.tune.space import TuneSection, changed_args, parse
from worthit.tune.tables import TUNE_TRACE


@dataclass
class TuneRun:
    """What one ``worthit tune`` did."""

    section: TuneSection
    served: int = 0  # candidates served by this run (their server started, or tried to)
    pruned: int = 0
    stopped: str = ""  # why it stopped before its rounds ended ("" when they ended)
    best: dict[str, tuple[dict[str, Any], float] | None] = field(default_factory=dict)
    trace_path: Path | None = None
    search: TuneSearch | None = None  # the search's state after the rounds (the confirmation reads it)
    gpu_minutes: float = 0.0  # what the candidates' servers held, resumed ones included (:func:`gpu_minutes`)


def budget_spent(section: TuneSection, served: int, minutes: float) -> str:
    """Why the rounds stop here ("" while the budget lasts): server starts or GPU-minutes, whichever first."""
    b = section.budget
    if b.server_starts is not None and served >= b.server_starts:
        return f"the budget of {b.server_starts} server starts is spent"
    if b.gpu_minutes is not None and minutes >= b.gpu_minutes:
        return f"the budget of {b.gpu_minutes:g} GPU-minutes is spent ({minutes:.1f} held by the candidates' servers)"
    return ""


def known_candidates(search: TuneSearch) -> list[Candidate]:
    """Every candidate served so far (measured or failed), in the order told, each once."""
    seen: dict[str, Candidate] = {}
    for t in search.trace():
        if t["status"] in (MEASURED, FAILED) and t["candidate_id"] not in seen:
            seen[str(t["candidate_id"])] = Candidate(dict(t["values"]), int(t["round"] or 0))
    return list(seen.values())


def write_trace(search: TuneSearch, path: Path) -> Path:
    """The search's trace as ``trace.parquet`` (a measured candidate that may not win carries why as its
    reason)."""
    rows = [
        {
            "round": int(t["round"] or 0),
            "candidate_id": str(t["candidate_id"]),
            "scenario": t["scenario"],
            "status": str(t["status"]),
            "value": t["value"],
            "values_json": json.dumps(t["values"], sort_keys=True, default=str),
            "reason": str(t["reason"] or ""),
        }
        for t in sorted(search.trace(), key=lambda t: (int(t["round"] or 0), str(t["scenario"])))
    ]
    return schemas.write(path, TUNE_TRACE, rows)


def _why_not_served(
    cfg: Mapping[str, Any],
    c: Candidate,
    section: TuneSection,
    *,
    shapes: Mapping[str, ModelShape | None],
    hw: Hardware,
    max_load: int | None,
    best_low: float | None,
    say: Callable[[str], None],
    round_: int,
) -> str | None:
    """Why a proposed candidate is skipped before it is served: vLLM would refuse its arguments, or the
    plan's bound rules it out (None: serve it; also when the plan cannot bound it, and vLLM decides)."""
    variant, args = candidate_args(cfg, c.values)
    why = unservable(variant, args)
    if why is not None:
        return why
    lt = load_section(cfg)
    try:
        b = bound(
            shapes.get(str(cfg["variants"][variant]["model"])),
            args,
            hw,
            prompt_tokens=lt.prompt_tokens,
            output_tokens=lt.output_tokens,
            kv_margin=section.kv_margin,
            max_load=max_load,
        )
    except InputError as e:  # a value the plan does not know
        say(f"tune round {round_}: {describe(c.values)}: no bound from the plan ({e}); served as it is")
        return None
    return screen(b, section, best_low)


def run_tune(
    cfg: Mapping[str, Any],
    *,
    source: str,
    hw: Hardware,
    shapes: Mapping[str, ModelShape | None],
    workdir: Path = Path("."),
    cores: int = 1,
    snakemake_args: Sequence[str] = (),
    say: Callable[[str], None] = print,
) -> TuneRun:
    """The tune of a validated config: rounds of proposed, screened and measured candidates (see the module)."""
    section = parse(cfg, source)
    if not section.space:
        raise InputError(f"{source}: tune.space is empty: no tune to run (name flags to search, e.g. max-num-seqs)")
    tdir = tune_dir(cfg, workdir)
    tdir.mkdir(parents=True, exist_ok=True)
    results = tdir.parent
    search = TuneSearch(section, tdir / "journal.log", study_name=str(cfg["study"]))
    run = TuneRun(section)
    max_load = max(load_section(cfg).levels, default=None)
    budget = section.budget.server_starts

    workflow = functools.partial(run_snakemake, workdir=workdir, cores=cores, extra=snakemake_args)
    gate = AccuracyGate(cfg, section, workdir=workdir, run=workflow)
    known = known_candidates(search)
    served = len(known)
    best_low: float | None = None
    if served:  # resumed: the throughput prune's bar from what is on disk
        study = Study(derived_config(cfg, known, source))
        for c in known:
            gpus = gpus_of(cfg, c.values)
            o = outcome(study, variant_of(c.id), results, gpus=gpus)
            run.gpu_minutes += gpu_minutes(results, variant_of(c.id), gpus)
            low = o.figures.get(THROUGHPUT_LOW)
            best_low = max(best_low or 0.0, low) if low is not None else best_low
    for round_ in range(search.next_round(), section.rounds):  # a resumed tune goes on where it stopped
        run.stopped = budget_spent(section, served, run.gpu_minutes)
        if run.stopped:
            break
        proposed = search.propose(round_)
        if not proposed:
            run.stopped = "the space has no candidate left to propose"
            break
        serve: list[Candidate] = []
        for c in proposed:
            if c.id in search.finished():
                continue
            why = _why_not_served(
                cfg, c, section, shapes=shapes, hw=hw, max_load=max_load, best_low=best_low, say=say, round_=round_
            )
            if why:
                search.record(c, Outcome.pruned(why))
                run.pruned += 1
                say(f"tune round {round_}: {describe(c.values)}: {why}")
                continue
            if budget is not None and served + len(serve) >= budget:
                break  # left pending: a larger budget resumes with it
            serve.append(c)
        serve = _screen_accuracy(gate, search, serve, run, say, round_)
        if serve:
            lows = _measure(cfg, source, search, serve, run, workflow=workflow, workdir=workdir, round_=round_, say=say)
            served += len(serve)
            if lows:
                best_low = max(best_low or 0.0, *lows)
        run.trace_path = write_trace(search, tdir / "trace.parquet")
    _settle_accuracy(gate, search, say)
    run.best = {s: search.best(s) for s in section.scenarios}
    run.trace_path = write_trace(search, tdir / "trace.parquet")
    run.search = search
    return run


def _measure(
    cfg: Mapping[str, Any],
    source: str,
    search: TuneSearch,
    serve: list[Candidate],
    run: TuneRun,
    *,
    workflow: Callable[[Path, Sequence[str]], int],
    workdir: Path,
    round_: int,
    say: Callable[[str], None],
) -> list[float]:
    """Measure a round's candidates through the workflow and tell the search what each reached (the lower
    bounds of the throughputs measured are returned, for the throughput prune's bar). A candidate of which
    the workflow ran nothing is told nothing: :class:`NotRun`, after the others are told."""
    section = run.section
    tdir = tune_dir(cfg, workdir)
    results = tdir.parent
    known = [k for k in known_candidates(search) if k.id not in {c.id for c in serve}]
    derived = derived_config(cfg, [*known, *serve], source)
    cfg_file = tdir / "study.yaml"
    atomic.write_text(cfg_file, yaml.safe_dump(derived, sort_keys=False))
    study = Study(derived)
    targets = [str(p.relative_to(workdir)) for c in serve for p in load_files(study, variant_of(c.id), results)]
    say(f"tune round {round_}: measuring {len(serve)} candidate(s): " + "; ".join(describe(c.values) for c in serve))
    rc = workflow(cfg_file, targets)
    note = f" (the workflow ended with exit status {rc}; its log is under .snakemake/log/)" if rc else ""
    unrun = not_run(study, [(c.id, variant_of(c.id)) for c in serve], results)
    lows: list[float] = []
    for c in serve:
        if c.id in unrun:
            continue
        gpus = gpus_of(cfg, c.values)
        o = outcome(study, variant_of(c.id), results, gpus=gpus, workflow_note=note)
        run.gpu_minutes += gpu_minutes(results, variant_of(c.id), gpus)
        search.record(c, o)
        run.served += 1
        low = o.figures.get(THROUGHPUT_LOW)
        if low is not None:
            lows.append(low)
        shown = (
            ", ".join(f"{s} {o.figures.get(s, 0.0):,.1f}" for s in section.scenarios)
            if o.status == MEASURED
            else f"{o.status}: {o.reason}"
        )
        say(f"tune round {round_}: {describe(c.values)}: {shown}")
    if unrun:
        write_trace(search, tdir / "trace.parquet")
        raise NotRun(not_run_message([describe(c.values) for c in serve if c.id in unrun], rc, cfg_file, workdir))
    return lows


def _screen_accuracy(
    gate: AccuracyGate,
    search: TuneSearch,
    serve: Sequence[Candidate],
    run: TuneRun,
    say: Callable[[str], None],
    round_: int,
) -> list[Candidate]:
    """The round's candidates whose served configuration may still be eligible: those that change what is
    served are screened first (tune.accuracy.screen_items); unacceptable ones are pruned, failed ones fail."""
    gate.screen([c.values for c in serve])
    keep: list[Candidate] = []
    for c in serve:
        j = gate.verdict(c.values)
        if j is not None and j.decision in (UNACCEPTABLE, ACC_FAILED):
            search.record(c, Outcome.pruned(j.reason) if j.decision == UNACCEPTABLE else Outcome.failed(j.reason))
            run.pruned += j.decision == UNACCEPTABLE
            say(f"tune round {round_}: {describe(c.values)}: {j.reason}")
            continue
        if j is not None:  # screened: its load is measured, and it may win only once acceptable
            say(f"tune round {round_}: {describe(c.values)}: {j.reason}")
        keep.append(c)
    return keep


def _settle_accuracy(gate: AccuracyGate, search: TuneSearch, say: Callable[[str], None]) -> None:
    """Before a best is named: the candidates within tune.accuracy.near_front of a scenario's best whose
    screen was inconclusive are measured on more items; every measured candidate that changes what is served
    and is not then acceptable may not win (``search.ineligible``, with why)."""
    measured = [t for t in search.trace() if t["status"] == MEASURED and t["value"] is not None]
    gate.screen([t["values"] for t in measured])  # a resumed tune: judged again from what is on disk
    near: list[Mapping[str, Any]] = []
    for s in gate.section.scenarios:
        rows = [t for t in measured if t["scenario"] == s]
        if rows:
            top = max(float(t["value"]) for t in rows)
            near += [t["values"] for t in rows if float(t["value"]) >= (1 - gate.section.accuracy_near_front) * top]
    gate.settle(near)
    for t in measured:
        j = gate.verdict(t["values"])
        if j is not None and j.decision != ACCEPTABLE:
            cid = str(t["candidate_id"])
            if cid not in search.ineligible:
                search.ineligible[cid] = f"not eligible: {j.reason}"
                say(f"tune: {describe(t['values'])}: not eligible to win ({j.reason})")


def summary_lines(run: TuneRun, cfg: Mapping[str, Any]) -> list[str]:
    """The tune's end, as printed: the best measured candidate per scenario with its serve flags."""
    out: list[str] = []
    for s, best in run.best.items():
        if best is None:
            out.append(f"{s}-first: no candidate measured yet")
            continue
        values, figure = best
        variant, _ = candidate_args(cfg, values)
        flags = shlex.join(engine_flags(changed_args(values)))
        out.append(f"{s}-first: {figure:,.1f} {UNITS.get(s, '')}: variant {variant} {flags}".rstrip())
    out.append(
        f"served {run.served} candidate(s) in this run, pruned {run.pruned} by the plan or the accuracy screen; "
        f"the candidates' servers held {run.gpu_minutes:,.1f} GPU-minutes (on a CPU host: server-minutes)"
        + (f"; stopped: {run.stopped}" if run.stopped else "")
    )
    out.append(
        "each figure is one server's: the best of many noisy candidates is often a lucky one, so the "
        "confirmation on fresh servers decides the recommendation"
    )
    if run.trace_path is not None:
        out.append(f"trace: {run.trace_path}")
    return out
