"""The plan set against the measurement (``plan_vs_measured``, worthit.plan.compare) as a report table.

``worthit plan`` predicts each variant's figures from the roofline before anything is served; this view shows,
per variant, what it predicted, what the study measured, their ratio and whether the ratio lies within the
stated tolerance (a prediction outside it is flagged over or under). The TPOT row's ratio is the achieved
fraction of the memory bandwidth (MBU)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worthit import schemas
from worthit.report.views import LONG, NUM, TEXT, Column, View

COLUMNS = (
    Column("variant", "variant", TEXT),
    Column("quantity", "quantity", TEXT),
    Column("unit", "unit", TEXT),
    Column("predicted", "predicted", NUM, 2),
    Column("measured", "measured", NUM, 2),
    Column("ratio", "measured / predicted", NUM, 2),
    Column("tolerance_shown", "tolerance", TEXT),
    Column("verdict", "within tolerance", TEXT),
    Column("note", "how it was measured", LONG),
)


def _row(r: Mapping[str, Any]) -> dict[str, Any]:
    tol, kind = r.get("tolerance"), r.get("tolerance_kind")
    shown = "" if tol is None else (f"±{tol:.0%}" if kind == "relative" else f"within {tol:g}x")
    within = r.get("within_tolerance")
    verdict = "not judged" if within is None else ("yes" if within else f"no: {r.get('flag') or 'outside'}")
    return {**r, "tolerance_shown": shown, "verdict": verdict}


def view(rows: Sequence[Mapping[str, Any]]) -> View:
    """The ``plan_vs_measured`` rows as a report table (one row per variant and quantity)."""
    return View(
        schemas.PLAN_VS_MEASURED,
        "Predicted before measuring: the plan against the measurement",
        "worthit plan's roofline predictions (made before any server started) beside what the study measured. "
        "KV blocks and critical concurrency come from the memory model; the TPOT floor at the lowest level from "
        "(weights + KV read per step) / peak bandwidth, so measured / predicted there is the bandwidth fraction "
        "achieved (MBU); the throughput ceiling from the same step time at the largest batch the KV pool holds. "
        "A ratio outside the tolerance is flagged: feed a finished study back with worthit plan --calibration.",
        COLUMNS,
        [_row(r) for r in rows],
        order=97,
        empty="No comparison: the plan or the measurements it needs are missing (see plan_vs_measured.md).",
    )
