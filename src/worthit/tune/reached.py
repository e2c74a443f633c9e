"""What a tune candidate reached, read from its load-level files: per scenario the figure the search ranks it by
(:func:`reached`: the concurrency per GPU at which the SLO is reached, or the output tok/s per GPU under the
TPOT ceiling), what came of it (:func:`outcome`: measured or failed, with why) and the GPU-minutes its server
held (:func:`gpu_minutes`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from worthit import cost
from worthit.config import Study
from worthit.experiments.loadtest.report import Level, levels_of
from worthit.experiments.loadtest.section import section as load_section
from worthit.metrics import Slo
from worthit.report.data import VariantResults, read_result
from worthit.report.rules import Rules
from worthit.tune.search import Outcome
from worthit.tune.space import LATENCY, THROUGHPUT

THROUGHPUT_LOW = "throughput_low"  # the throughput figure's lower interval bound (the throughput prune's bar)
UNITS = {LATENCY: "concurrency per GPU at the SLO", THROUGHPUT: "output tok/s per GPU under the TPOT ceiling"}


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
    return [
        results / f"variant~{variant}" / f"{lv.path(r)}.parquet"
        for lv, r in load_section(study.cfg).level_runs(variant)
    ]


def candidate_results(study: Study, variant: str, results: Path) -> VariantResults:
    """The candidate's load-level files that are on disk, read as the report reads a variant's."""
    return VariantResults(variant, [read_result(p) for p in load_files(study, variant, results) if p.exists()])


def outcome(study: Study, variant: str, results: Path, *, gpus: int, workflow_note: str = "") -> Outcome:
    """What came of a candidate, from its files: measured, or failed with the first failure's reason."""
    slo = Slo.from_config(study.cfg.get("slo"))
    ceiling = Rules.from_config(study.cfg).throughput_tpot_ms
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


def not_run(study: Study, candidates: Iterable[tuple[str, str]], results: Path) -> list[str]:
    """The candidates (shown name, variant) of which the workflow wrote no load result at all, not even a
    failure record: nothing was measured, so nothing may be told (a candidate that fails writes its reason)."""
    return [shown for shown, variant in candidates if not any(p.exists() for p in load_files(study, variant, results))]
