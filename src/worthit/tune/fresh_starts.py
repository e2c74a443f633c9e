"""The confirmation on fresh servers: the winner's-curse guard, measured.

After the rounds, the top ``confirm.top`` measured candidates of each scenario and vLLM's defaults (the
baseline variant as configured, no flag of the space set) are served again ``confirm.repeats`` times each, every
time on a fresh server start, interleaved: every candidate's first start, then every candidate's second, so
a drift of the machine over the confirmation falls on all of them alike. Each start is a variant of the tune's
study (``tune_<id>_start<k>``, :func:`~.candidates.start_variant`) measured by the workflow like any other, so an
interrupted confirmation resumes and a failed start is a failure record. Its figures per start go to
:func:`.confirm.decide`, the report's own rules: a winner only when its interval clears the runner-up's and
the defaults' by ``decide.min_speedup``, otherwise a tie that recommends the fewest changed flags.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from worthit import atomic, schemas
from worthit.config import Study
from worthit.report.rules import Rules
from worthit.tune.candidates import derived_config, describe, gpus_of, start_variant, tune_dir
from worthit.tune.confirm import DEFAULTS, Confirmation, Confirmed, decide
from worthit.tune.driver import NotRun, not_run_message, run_snakemake
from worthit.tune.reached import UNITS, load_files, not_run, outcome
from worthit.tune.rounds import known_candidates
from worthit.tune.search import MEASURED, Candidate, TuneSearch
from worthit.tune.space import VARIANT, TuneSection, changed_args
from worthit.tune.tables import TUNE_CONFIRMATION


@dataclass(frozen=True)
class ScenarioConfirmation:
    """One scenario's confirmation: each re-measured candidate's figures per start, and the decision."""

    scenario: str
    runs: dict[str, tuple[float, ...]]  # name -> its figure from each fresh start that measured something
    ids: dict[str, str]  # name -> candidate id
    changed: dict[str, int]  # name -> flags it changes
    decision: Confirmation | None
    note: str = ""  # why there is no decision


@dataclass
class ConfirmationRun:
    scenarios: list[ScenarioConfirmation] = field(default_factory=list)
    starts: int = 0  # fresh starts measured by this run
    found: int = 0  # fresh starts with every load result on disk, this run's and earlier runs'
    expected: int = 0  # fresh starts the confirmation asks for
    path: Path | None = None


def defaults_candidate(cfg: Mapping[str, Any], section: TuneSection) -> Candidate:
    """vLLM's defaults: the baseline variant as configured, none of the space's flags set."""
    return Candidate({VARIANT: cfg["baseline_variant"]} if VARIANT in section.space else {})


def changed_flags(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> int:
    """Flags a candidate sets, and a variant other than the baseline (one more change to make)."""
    variant = values.get(VARIANT)
    return len(changed_args(values)) + int(variant is not None and variant != cfg["baseline_variant"])


def picks(search: TuneSearch, section: TuneSection) -> dict[str, list[Candidate]]:
    """The top ``confirm.top`` measured candidates of each scenario that may win, best first."""
    out: dict[str, list[Candidate]] = {}
    for s in section.scenarios:
        rows = [t for t in search.trace() if t["scenario"] == s and t["status"] == MEASURED and t["eligible"]]
        rows.sort(key=lambda t: -(t["value"] if t["value"] is not None else float("-inf")))
        out[s] = [Candidate(dict(t["values"]), int(t["round"] or 0)) for t in rows[: section.confirm_top]]
    return out


def confirm(
    cfg: Mapping[str, Any],
    search: TuneSearch,
    section: TuneSection,
    *,
    source: str,
    workdir: Path = Path("."),
    cores: int = 1,
    snakemake_args: Sequence[str] = (),
    say: Callable[[str], None] = print,
    serve: bool = True,
) -> ConfirmationRun:
    """Serve the top candidates and the defaults ``confirm.repeats`` times each, interleaved, and decide.

    ``serve=False`` serves nothing: the decision is made from the fresh starts already on disk (an interrupted
    confirmation's, shown by ``worthit tune --no-confirm``), and a side short of two starts is named in the note.
    """
    run = ConfirmationRun()
    top = picks(search, section)
    base = defaults_candidate(cfg, section)
    chosen: dict[str, Candidate] = {base.id: base}
    for cands in top.values():
        chosen.update({c.id: c for c in cands})
    repeats = section.confirm_repeats
    starts = [(c, k) for k in range(1, repeats + 1) for c in chosen.values()]
    derived = derived_config(cfg, known_candidates(search), source, starts=starts)
    tdir = tune_dir(cfg, workdir)
    results = tdir.parent
    cfg_file = tdir / "study.yaml"
    if serve:
        atomic.write_text(cfg_file, yaml.safe_dump(derived, sort_keys=False))
    study = Study(derived)
    for k in range(1, repeats + 1 if serve else 1):  # every candidate's k-th start before any (k+1)-th
        wave = list(chosen.values())
        missing = [
            str(p.relative_to(workdir))
            for c in wave
            for p in load_files(study, start_variant(c.id, k), results)
            if not p.exists()
        ]
        if not missing:
            continue
        say(f"tune confirmation: fresh start {k} of {repeats} for {len(wave)} candidate(s)")
        rc = run_snakemake(cfg_file, missing, workdir=workdir, cores=cores, extra=snakemake_args)
        run.starts += len({m.split("/variant~", 1)[1].split("/", 1)[0] for m in missing})
        starts_run = [
            (f"{DEFAULTS if c.id == base.id else describe(c.values)}, start {k}", start_variant(c.id, k)) for c in wave
        ]
        unrun = not_run(study, starts_run, results)
        if unrun:
            raise NotRun(not_run_message(unrun, rc, cfg_file, workdir))
    rules = Rules.from_config(cfg)
    per_start: dict[str, list[dict[str, float]]] = {}
    run.expected = len(starts)
    for c in chosen.values():
        per_start[c.id] = []
        for k in range(1, repeats + 1):
            run.found += all(p.exists() for p in load_files(study, start_variant(c.id, k), results))
            o = outcome(study, start_variant(c.id, k), results, gpus=gpus_of(cfg, c.values))
            if o.status == MEASURED:
                per_start[c.id].append(o.figures)
    for s in section.scenarios:
        names = _names([*top[s], base], base.id)
        runs = {names[cid]: tuple(f.get(s, 0.0) for f in per_start[cid]) for cid in names}
        ids = {names[cid]: cid for cid in names}
        changed = {names[c.id]: changed_flags(cfg, c.values) for c in [*top[s], base]}
        rivals = [Confirmed(names[c.id], runs[names[c.id]], changed[names[c.id]]) for c in top[s] if c.id != base.id]
        contenders = [r for r in rivals if len(r.runs) >= 2]
        defaults = Confirmed(DEFAULTS, runs[DEFAULTS], 0)
        note = ""
        decision: Confirmation | None = None
        most = max((len(r) for n, r in runs.items() if n != DEFAULTS), default=0)
        if len(defaults.runs) < 2:
            note = f"vLLM's defaults measured on {len(defaults.runs)} of {repeats} fresh starts: no interval to judge"
        elif not contenders:
            note = f"no candidate of the rounds measured on two fresh starts or more (the most: {most} of {repeats})"
        else:
            decision = decide(contenders, defaults, rules, quantity=UNITS.get(s, s))
        run.scenarios.append(ScenarioConfirmation(s, runs, ids, changed, decision, note))
    if serve or run.found:
        run.path = _write(run, tdir / "confirmation.parquet")
    return run


def _names(cands: Sequence[Candidate], defaults_id: str) -> dict[str, str]:
    """Each candidate's name in the confirmation, by id: the defaults', or its flags; two candidates that
    read alike (a speculative k of 0 under two methods serves the same) are told apart by their ids."""
    names = {c.id: (DEFAULTS if c.id == defaults_id else describe(c.values)) for c in cands}
    twice = {n for n in names.values() if list(names.values()).count(n) > 1}
    return {cid: (f"{n} [{cid}]" if n in twice else n) for cid, n in names.items()}


def _write(run: ConfirmationRun, path: Path) -> Path:
    rows = []
    for sc in run.scenarios:
        for name, values in sc.runs.items():
            rec = sc.decision is not None and sc.decision.recommended == name
            rows.append(
                {
                    "scenario": sc.scenario,
                    "name": name,
                    "candidate_id": sc.ids[name],
                    "runs_json": json.dumps(list(values)),
                    "mean": sum(values) / len(values) if values else None,
                    "changed_flags": sc.changed[name],
                    "outcome": sc.decision.outcome if rec and sc.decision else "",
                    "recommended": rec,
                    "reason": "; ".join(sc.decision.reasons) if rec and sc.decision else (sc.note if sc.note else ""),
                }
            )
    return schemas.write(path, TUNE_CONFIRMATION, rows)


def lines(run: ConfirmationRun) -> list[str]:
    """The confirmation as printed: per scenario the recommendation and why, each side's runs."""
    out: list[str] = []
    for sc in run.scenarios:
        shown = "; ".join(f"{n} {', '.join(f'{v:,.1f}' for v in r) or 'no run'}" for n, r in sc.runs.items())
        if sc.decision is None:
            out.append(f"{sc.scenario}-first confirmed: undecided: {sc.note} ({shown})")
            continue
        d = sc.decision
        head = "winner" if d.outcome == "winner" else "tie, recommend"
        out.append(f"{sc.scenario}-first confirmed: {head} {d.recommended} (fresh starts: {shown})")
        out.append(f"  why: {d.reasons[-1]}")
    if run.path is not None:
        out.append(f"confirmation: {run.path} ({run.starts} fresh start(s) measured by this run)")
    return out
