"""``worthit tune``: the search in rounds, each candidate measured as a variant of the tune's own study.

A round asks the search (:mod:`.search`, Optuna TPE per scenario, its journal the tune's memory) for
``per_round`` candidates, screens them with the plan's bounds (:mod:`.prune`: pruned candidates are recorded
with the prediction, never served), then writes the tune's study, ``results/<study>-tune/tune/study.yaml``:
the study's config with one variant per candidate served so far (``tune_<id>``: the candidate's base variant
with its flag values, experiments ``[loadtest]``). Snakemake measures the new candidates' load levels like any
variant's: the study's levels and repeats, a failure (a flag the build refuses, an OOM, a server that never
answers) written as a failure record with its reason, finished files never measured again, a cluster profile
(``--profile``) running a round's candidates side by side. What each candidate reached is read back from its
files and told to the search:

* latency-first: the concurrency at which the SLO is reached, per GPU (0 when no level meets it): between the
  highest level whose P99 TTFT and P99 TPOT meet the SLO and the next one, where the P99s' ratio to their
  bounds crosses 1 (log-linear in concurrency); above the highest level, when every level meets it,
  extrapolated from the top two levels by at most one grid step. A figure that varies with the candidate, so
  that the confirmation separates candidates that differ and ties only those that do not
  (:func:`slo_concurrency`);
* throughput-first: the most output tok/s among the levels whose P99 TPOT stays under ``decide.throughput_tpot_ms``,
  per GPU (0 when none does).

An interrupted tune resumes: the journal holds every candidate told and the round's pending ones (asked again
as they were), and Snakemake skips what is on disk. The budget (``tune.budget.server_starts``) counts the
candidates served; when it is spent the tune stops, and a larger budget resumes it. The trace is
``results/<study>-tune/tune/trace.parquet`` (:data:`~.tables.TUNE_TRACE`).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from worthit import atomic, cost, schemas
from worthit import engine_args as eargs
from worthit.config import ROOT, Study
from worthit.errors import InputError
from worthit.experiments.loadtest.report import Level, levels_of
from worthit.experiments.tune.accuracy_gate import ACCEPTABLE, UNACCEPTABLE, AccuracyGate
from worthit.experiments.tune.accuracy_gate import FAILED as ACC_FAILED
from worthit.experiments.tune.prune import bound, candidate_args, screen, unservable
from worthit.experiments.tune.search import FAILED, MEASURED, PRUNED, Candidate, Outcome, TuneSearch
from worthit.experiments.tune.space import LATENCY, THROUGHPUT, TuneSection, changed_args, parse
from worthit.experiments.tune.studies import own_study
from worthit.experiments.tune.tables import TUNE_TRACE
from worthit.metrics import Slo
from worthit.plan.hardware import Hardware
from worthit.plan.shapes import ModelShape, parallel_sizes
from worthit.report.data import VariantResults, read_result
from worthit.server import engine_flags
from worthit.server.cleanup import set_pdeathsig

TUNE_SUFFIX = "-tune"
VARIANT_PREFIX = "tune_"
THROUGHPUT_LOW = "throughput_low"  # the throughput figure's lower interval bound (the throughput prune's bar)
UNITS = {LATENCY: "concurrency per GPU at the SLO", THROUGHPUT: "output tok/s per GPU under the TPOT ceiling"}


def tune_study(study: str) -> str:
    """The name of the tune's study (its results folder is ``results/<name>``)."""
    return f"{study}{TUNE_SUFFIX}"


def variant_of(candidate_id: str) -> str:
    return f"{VARIANT_PREFIX}{candidate_id}"


def tune_dir(cfg: Mapping[str, Any], workdir: Path = Path(".")) -> Path:
    return workdir / "results" / tune_study(str(cfg["study"])) / "tune"


SPECULATIVE = "speculative-config."


def describe(values: Mapping[str, Any]) -> str:
    """A candidate as a person reads it (``max-num-seqs=8``; vLLM's defaults when it sets nothing). A
    speculative k of 0 serves no speculation (:func:`~.space.changed_args`), so its speculative keys read
    ``no speculation`` rather than a method that is not served."""
    off = any(k.startswith(SPECULATIVE) for k in values) and "speculative-config" not in changed_args(values)
    shown = [f"{k}={v}" for k, v in values.items() if not (off and k.startswith(SPECULATIVE))]
    return ", ".join([*shown, *(["no speculation"] if off else [])]) or "vLLM's defaults"


def gpus_of(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> int:
    """The GPUs a candidate's server holds (tensor x pipeline x data parallel), at least one."""
    tp, pp, dp = parallel_sizes(candidate_args(cfg, values)[1])
    return max(1, tp * pp * dp)


def start_variant(candidate_id: str, start: int) -> str:
    """The variant of a candidate's ``start``-th fresh server in the confirmation (:mod:`.fresh_starts`)."""
    return f"{VARIANT_PREFIX}{candidate_id}_start{start}"


def own_args(serve: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's engine arguments ``args`` (serve's, its variant's and its values merged) as a variant
    of the tune's study sets them over ``serve``'s: what differs from serve's, and null for a flag of serve's
    the candidate does not serve (a speculative k of 0 over serve's ``speculative-config``), which
    ``worthit.server.engine_flags`` leaves out of the command line. Serve's flags themselves stay in serve."""
    own = {k: v for k, v in args.items() if not (eargs.has(serve, k) and eargs.get(serve, k) == v)}
    return {**own, **{k: None for k in serve if not eargs.has(args, k)}}


def _variant(cfg: Mapping[str, Any], c: Candidate, what: str) -> dict[str, Any]:
    base, args = candidate_args(cfg, c.values)
    v = copy.deepcopy(dict(cfg["variants"][base]))
    v["engine_args"] = own_args(cfg["serve"]["engine_args"], args)
    v["experiments"] = ["loadtest"]
    v.pop("baseline", None)
    v["description"] = f"{what} {c.id}: {base} with {describe(c.values)}"
    return v


def derived_config(
    cfg: Mapping[str, Any],
    candidates: Iterable[Candidate],
    source: str = "tune",
    starts: Iterable[tuple[Candidate, int]] = (),
) -> dict[str, Any]:
    """The tune's study: ``cfg`` with one load-tested variant per candidate, and one per fresh start of the
    confirmation (``starts``: candidate and start number), validated with its defaults filled."""
    variants: dict[str, Any] = {}
    for c in candidates:
        variants[variant_of(c.id)] = _variant(cfg, c, "tune candidate")
    for c, k in starts:
        variants[start_variant(c.id, k)] = _variant(cfg, c, f"fresh start {k} of the confirmation of")
    if not variants:
        raise InputError(f"{source}: the tune has no candidate to serve")
    name = tune_study(str(cfg["study"]))
    return own_study(cfg, study=name, variants=variants, baseline=next(iter(variants)), source=source)


@dataclass(frozen=True)
class Reached:
    """What a measured candidate reached, per GPU (``gpus`` the GPUs its server holds)."""

    latency: float
    throughput: float
    throughput_low: float | None
    gpus: int

    def figures(self) -> dict[str, float]:
        out = {LATENCY: self.latency, THROUGHPUT: self.throughput}
        if self.throughput_low is not None:
            out[THROUGHPUT_LOW] = self.throughput_low
        return out


def _slo_ratio(lv: Level, slo: Slo) -> float | None:
    """How far a level's P99s are from the SLO: the largest P99 / bound (<= 1: met; None: no bound set)."""
    parts = []
    if slo.ttft_ms is not None:
        parts.append((lv.ttft_p99.value or math.inf) / slo.ttft_ms)
    if slo.tpot_ms is not None and lv.tpot_p99.value is not None:
        parts.append(lv.tpot_p99.value / slo.tpot_ms)
    return max(parts) if parts else None


def slo_concurrency(levels: Sequence[Level], slo: Slo) -> float:
    """The concurrency at which the SLO is reached, read off the measured levels (0: none meets it): the
    highest level meeting it, moved towards the next level by where the P99s' ratio to their bounds crosses 1
    (log-linear in concurrency), or beyond the top level by the top two levels' slope, at most one grid step."""
    pts = sorted(
        (lv.concurrency, r) for lv in levels if lv.ok and lv.concurrency > 0 and (r := _slo_ratio(lv, slo)) is not None
    )
    pts = [(c, r) for c, r in pts if r > 0]
    met = [i for i, (_, r) in enumerate(pts) if r <= 1]
    if not met:
        return 0.0
    i = met[-1]
    c_a, r_a = pts[i]
    if i + 1 < len(pts):
        c_b, r_b = pts[i + 1]
        t = -math.log(r_a) / (math.log(r_b) - math.log(r_a)) if r_b > r_a else 0.0
        return math.exp(math.log(c_a) + min(max(t, 0.0), 1.0) * (math.log(c_b) - math.log(c_a)))
    if i == 0:
        return float(c_a)
    c_p, r_p = pts[i - 1]
    slope = (math.log(r_a) - math.log(r_p)) / (math.log(c_a) - math.log(c_p))
    step = math.log(c_a) - math.log(c_p)
    ahead = min(-math.log(r_a) / slope, step) if slope > 0 else step
    return math.exp(math.log(c_a) + ahead)


def reached(levels: Sequence[Level], slo: Slo, tpot_ceiling_ms: float | None, gpus: int) -> Reached | None:
    """The scenarios' figures from a candidate's levels (None: no level measured anything)."""
    ok = [lv for lv in levels if lv.ok]
    if not ok:
        return None
    gpus = max(1, gpus)
    under = [lv for lv in ok if lv.within(tpot_ceiling_ms) and lv.output_tok_per_s.value is not None]
    top = max(under, key=lambda lv: float(lv.output_tok_per_s.value or 0.0), default=None)
    return Reached(
        latency=slo_concurrency(ok, slo) / gpus,
        throughput=(float(top.output_tok_per_s.value or 0.0) / gpus) if top else 0.0,
        throughput_low=(float(top.output_tok_per_s.low) / gpus) if top and top.output_tok_per_s.low else None,
        gpus=gpus,
    )


def load_files(study: Study, variant: str, results: Path) -> list[Path]:
    """The candidate's load-level files (every level and run of the study)."""
    return [results / f"variant~{variant}" / f"{lv.path(r)}.parquet" for lv, r in study.level_runs(variant)]


def candidate_results(study: Study, variant: str, results: Path) -> VariantResults:
    """The candidate's load-level files that are on disk, read as the report reads a variant's."""
    return VariantResults(variant, [read_result(p) for p in load_files(study, variant, results) if p.exists()])


def outcome(study: Study, variant: str, results: Path, *, gpus: int, workflow_note: str = "") -> Outcome:
    """What came of a candidate, from its files: measured, or failed with the first failure's reason."""
    slo = Slo.from_config(study.cfg.get("slo"))
    ceiling = (study.cfg.get("decide") or {}).get("throughput_tpot_ms")
    paths = load_files(study, variant, results)
    missing = [p for p in paths if not p.exists()]
    if missing:
        return Outcome.failed(
            f"{len(missing)} of {len(paths)} load results were not written ({missing[0]}){workflow_note}"
        )
    got_files = VariantResults(variant, [read_result(p) for p in paths])
    got = reached(levels_of(got_files, slo), slo, ceiling, gpus)
    if got is None:
        first = next((f for f in got_files.files if not f.ok), None)
        why = f"{first.status}: {first.cause}" if first is not None else "no level measured a request"
        return Outcome.failed(why)
    return Outcome.measured(got.figures())


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


class Interrupted(Exception):
    """The tune was asked to stop (SIGTERM) while the workflow ran: what finished is kept, the candidates of
    the round stay pending in the journal, and the same command resumes with them."""


class NotRun(Exception):
    """The workflow ran none of some candidates' measurements (a stale lock, a Snakemake error before any
    job): they are not failed candidates, so they stay pending; the message says what to do."""


def gpu_minutes(results: Path, variant: str, gpus: int) -> float:
    """What a candidate's server held: its lifetime from its log and exit record (:func:`worthit.cost.server_row`)
    in minutes, times the GPUs it claims (at least one: on a host without GPUs, its server-minutes, so the
    budget bounds what the candidates hold of the machine either way); 0 before it ever started."""
    row = cost.server_row(
        cost.ServerFiles(
            variant, f"{results}/logs/serve/{variant}.log", f"{results}/variant~{variant}/server.json.exit", gpus
        )
    )
    return float(row["wall_s"] or 0.0) / 60 * max(1, gpus)


def budget_spent(section: TuneSection, served: int, minutes: float) -> str:
    """Why the rounds stop here ("" while the budget lasts): server starts or GPU-minutes, whichever first."""
    b = section.budget
    if b.server_starts is not None and served >= b.server_starts:
        return f"the budget of {b.server_starts} server starts is spent"
    if b.gpu_minutes is not None and minutes >= b.gpu_minutes:
        return f"the budget of {b.gpu_minutes:g} GPU-minutes is spent ({minutes:.1f} held by the candidates' servers)"
    return ""


# The round's Snakemake runs under this shell, the leader of a session of its own: told SIGTERM or SIGINT
# (by the tune, or by the kernel when the tune dies: PR_SET_PDEATHSIG), it passes SIGTERM to the whole session,
# Snakemake and its jobs, and waits for Snakemake. SIGTERM for both: a background job of a non-interactive
# shell ignores SIGINT, and so would the measurements under it.
GUARD = """stop() { trap '' TERM INT; kill -TERM 0; wait "$p"; exit "$1"; }
trap 'stop 143' TERM
trap 'stop 130' INT
"$@" & p=$!
wait "$p"
"""


def start_workflow(cmd: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start a round's Snakemake so that a stop reaches its jobs as well, and so that it cannot outlive the
    tune: killed outright (SIGKILL, the OOM killer), the tune cannot forward a signal, so the kernel tells the
    workflow's guard (:data:`GUARD`) instead of letting the round run on, servers and all, with no one to read
    it. Snakemake alone, told SIGTERM, would wait for its running jobs: a server still starting and the load
    levels queued behind it hold such a stop for minutes, past the grace a cluster (SLURM's KillWait) or a
    time-boxed call gives before SIGKILL. Told too, each server stops its engine and each measurement ends
    unwritten (results are written whole or not at all), so the workflow ends within seconds."""
    return subprocess.Popen(  # noqa: PLW1509 (no threads start it)
        ["/bin/sh", "-c", GUARD, "worthit-tune-workflow", *cmd], preexec_fn=set_pdeathsig, start_new_session=True
    )


def stop_workflow(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Pass a stop to the round's workflow (:func:`start_workflow`: Snakemake and its jobs, as a terminal's
    Ctrl-C reaches every process of its foreground group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, signum)


def run_snakemake(config_file: Path, targets: Sequence[str], *, workdir: Path, cores: int, extra: Sequence[str]) -> int:
    """The workflow on the tune's study for ``targets``; a SIGTERM or Ctrl-C to the tune reaches it and its
    jobs (:func:`stop_workflow`: its servers stop) before the tune exits: :class:`Interrupted`, or the
    KeyboardInterrupt, so that no candidate is told an outcome the stop made. A server's state file a killed
    Snakemake left marked incomplete is unmarked when the workflow is parsed
    (:func:`worthit.server.state.forget_incomplete_marks`), so a resumed round measures its candidates."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(config_file),
        "--cores",
        str(cores),
        "--keep-going",
        "--rerun-incomplete",
        *extra,
        *targets,
    ]
    proc = start_workflow(cmd)
    previous = signal.getsignal(signal.SIGTERM)
    stopped: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        stopped.append(signum)
        stop_workflow(proc, signum)

    signal.signal(signal.SIGTERM, forward)
    try:
        rc = proc.wait()
        if stopped:
            raise Interrupted(f"stopped by signal {stopped[0]} while the workflow ran (it exited with {rc})")
        return rc
    except KeyboardInterrupt:  # Ctrl-C: the workflow's own session did not see it; pass it on
        stop_workflow(proc, signal.SIGINT)
        proc.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            stop_workflow(proc, signal.SIGTERM)
            proc.wait()


def not_run(study: Study, candidates: Iterable[tuple[str, str]], results: Path) -> list[str]:
    """The candidates (shown name, variant) of which the workflow wrote no load result at all, not even a
    failure record: nothing was measured, so nothing may be told (a candidate that fails writes its reason)."""
    return [shown for shown, variant in candidates if not any(p.exists() for p in load_files(study, variant, results))]


def not_run_message(shown: Sequence[str], rc: int, cfg_file: Path, workdir: Path) -> str:
    """What to do when the workflow ran none of some candidates' measurements (:class:`NotRun`)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    where = f"its log: {logs[-1]}" if logs else "Snakemake's messages are above"
    return (
        f"the workflow ran no measurement of {len(shown)} candidate(s) ({'; '.join(shown)}): exit status {rc}, "
        f"{where}. Nothing was told of them: they stay pending, and the same command measures them. If "
        "Snakemake says the directory cannot be locked and no other Snakemake runs here (one killed outright "
        f"leaves its lock), unlock it first: snakemake -s {ROOT / 'Snakefile'} -d {workdir} --unlock "
        f"--configfile {cfg_file}"
    )


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
    lt = cfg["loadtest"]
    try:
        b = bound(
            shapes.get(str(cfg["variants"][variant]["model"])),
            args,
            hw,
            prompt_tokens=int(lt["prompt_tokens"]),
            output_tokens=int(lt["output_tokens"]),
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
    lt = cfg["loadtest"]
    max_load = max((int(c) for c in lt.get("levels") or []), default=None)
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


__all__ = [
    "FAILED",
    "MEASURED",
    "Interrupted",
    "NotRun",
    "PRUNED",
    "Reached",
    "UNITS",
    "candidate_results",
    "gpus_of",
    "TuneRun",
    "derived_config",
    "outcome",
    "reached",
    "describe",
    "known_candidates",
    "not_run",
    "not_run_message",
    "stop_workflow",
    "run_tune",
    "start_variant",
    "summary_lines",
    "tune_study",
    "variant_of",
    "write_trace",
]
