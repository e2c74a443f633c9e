"""The plan against the measurement: the fractions a finished study measured (:func:`calibrate`, for
``--calibration``) and each predicted figure beside its measurement (:func:`compare`, ``plan_vs_measured``),
flagging every figure off by more than its tolerance. These read Parquet: pyarrow is imported when called."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit import gpus
from worthit.experiments.kv.tables import KV_CACHE
from worthit.plan.predictions import PlanCalibration
from worthit.plan.shapes import GIB, PlanError

DEFAULT_TOLERANCES = {"kv_blocks": 0.10, "tpot": 0.25, "throughput": 0.30, "knee_factor": 2.0}


def _read(path: Path, table: Any) -> Any:
    from worthit import schemas

    return schemas.read(path, table) if path.is_file() else None


def _engine_util(args: Mapping[str, Any]) -> float:
    return float(eargs.get(args, "gpu-memory-utilization") or 0.9)


def calibrate(results: str | os.PathLike[str]) -> PlanCalibration:
    """Fractions a finished study measured (``results/<study>``): the bandwidth fraction at the lowest
    load level (MBU: weight and KV bytes per step / TPOT / peak, as the report's capacity table has it:
    :mod:`worthit.experiments.kv.report`), the memory vLLM kept beyond weights and KV, and (when the study has
    a ``plan_vs_measured`` table) measured / predicted throughput."""
    from worthit import schemas
    from worthit.experiments.kv.tables import REPORT_CAPACITY

    root = Path(results)
    if not root.is_dir():
        raise PlanError(f"--calibration {root}: no such results folder (expected results/<study>)")
    capacity = {str(r["variant"]): r for r in _report_rows(root / "report", REPORT_CAPACITY)}
    mbus, overheads, gpu = [], [], None
    for kv_path in sorted(root.glob("variant~*/kv.parquet")):
        res = _read(kv_path, KV_CACHE)
        if res is None or not res.ok or res.table.num_rows == 0:
            continue
        row = res.to_pandas().iloc[0].to_dict()
        meta = res.metadata
        args = meta.get("engine_args") or {}
        hwm = meta.get("hardware") or {}
        gpu = gpu or hwm.get("gpu")
        spec = gpus.lookup(hwm.get("gpu"))
        tp = int(eargs.get(args, "tensor-parallel-size") or 1)
        kv_bytes = float(row["kv_tokens"]) * float(row["kv_bytes_per_token"])
        sized = eargs.get(args, "kv-cache-memory-bytes") or meta.get("emulated_gpu_memory_gib")  # not profiled
        if spec is not None and not sized and row.get("weight_bytes"):
            cap = spec.memory_gib * GIB
            overheads.append((_engine_util(args) * cap - (float(row["weight_bytes"]) + kv_bytes) / tp) / GIB)
        # a speculative step yields several tokens: its MBU is no fraction of plain decoding
        mbu_pct = (capacity.get(str(row["variant"])) or {}).get("mbu_pct")
        if spec is not None and not eargs.speculative_config(args) and mbu_pct is not None:
            mbus.append(float(mbu_pct) / 100)
    ratios = []
    pvm = _read(root / "plan_vs_measured.parquet", schemas.PLAN_VS_MEASURED)
    if pvm is not None and pvm.table.num_rows:
        df = pvm.to_pandas()
        ratios = [float(r) for r in df[(df["quantity"] == "output_tok_per_s") & df["ratio"].notna()]["ratio"]]
    if not mbus and not overheads:
        raise PlanError(f"--calibration {root}: no measured KV capacity or TPOT of a known GPU to calibrate from")
    return PlanCalibration(
        source=str(root),
        gpu=gpu,
        bandwidth_fraction=_median(mbus),
        overhead_gib=_median(overheads),
        throughput_fraction=_median(ratios),
    )


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _report_rows(report: Path, table: Any) -> list[dict[str, Any]]:
    """The ok rows of one of the report's tables (empty when the report has not been written)."""
    res = _read(report / f"{table.name.removeprefix('report_')}.parquet", table)
    if res is None or not res.ok:
        return []
    return [r for r in res.table.to_pylist() if r.get("status", "ok") == "ok"]


def compare(
    plan_rows: Sequence[Mapping[str, Any]],
    results: str | os.PathLike[str],
    tolerances: Mapping[str, float] | None = None,
    knee_fraction: float | None = None,
    report: str | os.PathLike[str] | None = None,
) -> list[dict[str, Any]]:
    """Rows of the ``plan_vs_measured`` table: per variant, each predicted figure next to its measurement.

    Every measured figure is the report's (``report``: the folder of its tables, default ``<results>/report``):
    KV blocks, critical concurrency and the throughput knee of its capacity table (the knee located by the
    study's ``decide.knee`` rules, :mod:`worthit.experiments.kv.report`; ``knee_fraction`` is that rule's
    fraction, for the note; None: the schema's default, :class:`worthit.report.rules.Rules`), TPOT P50 and output
    tok/s of its levels table, pooled over runs. Only the grid's levels count: a named workload level is another
    workload."""
    from worthit.experiments.kv.tables import REPORT_CAPACITY
    from worthit.experiments.loadtest.tables import REPORT_LEVELS
    from worthit.report.rules import Rules

    if knee_fraction is None:
        knee_fraction = Rules().knee_throughput_fraction

    tol = {**DEFAULT_TOLERANCES, **(tolerances or {})}
    root = Path(results)
    rdir = Path(report) if report is not None else root / "report"
    capacity = {str(r["variant"]): r for r in _report_rows(rdir, REPORT_CAPACITY)}
    levels: dict[str, list[dict[str, Any]]] = {}
    for r in _report_rows(rdir, REPORT_LEVELS):
        if r.get("concurrency") is not None:
            levels.setdefault(str(r["variant"]), []).append(r)
    out: list[dict[str, Any]] = []

    def add(
        variant: str,
        quantity: str,
        *,
        unit: str,
        predicted: Any,
        measured: Any,
        kind: str,
        tolerance: float,
        note: str = "",
    ) -> None:
        ok_pred, ok_meas = predicted is not None and not _nan(predicted), measured is not None and not _nan(measured)
        ratio = float(measured) / float(predicted) if ok_pred and ok_meas and float(predicted) else None
        within: bool | None = None
        if ratio is not None:
            within = (1 / tolerance <= ratio <= tolerance) if kind == "factor" else abs(ratio - 1) <= tolerance
        out.append(
            {
                "variant": variant,
                "quantity": quantity,
                "unit": unit,
                "predicted": float(predicted) if ok_pred else None,
                "measured": float(measured) if ok_meas else None,
                "ratio": ratio,
                "tolerance": tolerance,
                "tolerance_kind": kind,
                "within_tolerance": within,
                "flag": None if within is not False else ("over" if ratio is not None and ratio > 1 else "under"),
                "note": note or None,
            }
        )

    for p in plan_rows:
        v = str(p["variant"])
        if p.get("status") == "not_applicable":
            continue
        cap = capacity.get(v) or {}
        if p.get("num_blocks") is not None or cap.get("num_blocks") is not None:
            add(
                v,
                "kv_blocks",
                unit="blocks",
                predicted=p.get("num_blocks"),
                measured=cap.get("num_blocks"),
                kind="relative",
                tolerance=tol["kv_blocks"],
            )
            add(
                v,
                "critical_concurrency",
                unit="requests",
                predicted=p.get("critical_concurrency"),
                measured=cap.get("kv_critical_concurrency"),
                kind="relative",
                tolerance=tol["kv_blocks"],
            )
        grid = sorted(levels.get(v, []), key=lambda r: int(r["concurrency"]))
        pts = [(int(r["concurrency"]), float(r["output_tok_per_s"])) for r in grid if r.get("output_tok_per_s")]
        if not pts:
            continue
        knee = cap.get("throughput_knee_concurrency")
        highest = max(c for c, _ in pts)
        note = (
            f"predicted bound: {p.get('bound')}; measured: the report's throughput knee, the lowest level reaching "
            f"{knee_fraction:.0%} of the best tok/s (decide.knee; levels {', '.join(str(c) for c, _ in pts)})"
        )
        if knee is not None and int(knee) == highest and (p.get("knee_concurrency") or 0) > highest:
            # throughput still rose at the highest level: the knee lies beyond the levels measured
            note += f"; still rising at {highest}: the knee is beyond the levels measured, not judged"
            knee = None
        add(
            v,
            "knee_concurrency",
            unit="requests",
            predicted=p.get("knee_concurrency"),
            measured=knee,
            kind="factor",
            tolerance=tol["knee_factor"],
            note=note,
        )
        tpot_by = {int(r["concurrency"]): r.get("tpot_ms_p50") for r in grid}
        lowest = min(tpot_by)
        planned = list(p.get("levels") or [])
        exp = list(p.get("tpot_expected_ms") or [])
        floor = list(p.get("tpot_floor_ms") or [])
        i = planned.index(lowest) if lowest in planned else None
        tpot_meas = tpot_by[lowest]
        mbu = floor[i] / float(tpot_meas) if i is not None and floor and tpot_meas else None
        add(
            v,
            f"tpot_ms_c{lowest}",
            unit="ms",
            predicted=exp[i] if i is not None and exp else None,
            measured=tpot_meas,
            kind="relative",
            tolerance=tol["tpot"],
            note=f"roofline floor {floor[i]:.2f} ms: achieved bandwidth fraction (MBU) {mbu:.0%}"
            if mbu is not None and i is not None
            else "",
        )
        best_c, best = max(pts, key=lambda x: x[1])
        j = planned.index(best_c) if best_c in planned else None
        tput = list(p.get("output_tok_per_s") or [])
        ceiling = p.get("throughput_ceiling_tok_per_s")
        add(
            v,
            "output_tok_per_s",
            unit="tok/s",
            predicted=tput[j] if j is not None and tput else None,
            measured=best,
            kind="relative",
            tolerance=tol["throughput"],
            note=f"best measured at concurrency {best_c}; roofline ceiling {ceiling:,.0f} tok/s at the predicted limit"
            if ceiling is not None
            else f"best measured at concurrency {best_c}",
        )
    return out


def _nan(x: Any) -> bool:
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return True
