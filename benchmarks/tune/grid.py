"""The ground truth of the tune replay: a worthit study whose variants are the points of a small grid,
measured with repeats, turned into ``grid.json`` for ``benchmarks/tune/replay.py``.

    # 1. the study: one variant per point of the tune: section's space (every run a load grid)
    .venvs/workflow/bin/python benchmarks/tune/grid.py config STUDY.yaml --out GRID_STUDY.yaml
    .venvs/workflow/bin/snakemake --cores 1 --configfile GRID_STUDY.yaml
    # 2. its results as the replay's grid (GRID_STUDY.points.json, written beside it, names each point)
    .venvs/workflow/bin/python benchmarks/tune/grid.py collect results/<study> --points GRID_STUDY.points.json \
        --out grid.json

``tune.defaults`` in STUDY.yaml (read here only) names vLLM's defaults as a point of the space, e.g.
``{max-num-seqs: 256, max-num-batched-tokens: 2048}``: the point the confirmation measures beside the best.

Each run of a point gives both scenarios' figures, as the tune would read them: ``throughput``, the most
output tok/s of a level whose TPOT P50 is under ``decide.throughput_tpot_ms`` (every level when none is set);
``latency``, the highest concurrency whose TTFT P99 and TPOT P99 meet the SLO (0 when none does). A run's
``server_minutes`` is its variant's server start plus its share of the serving time (``cost.parquet``): the
study measures a point's runs on one server, so a fresh start's own noise is not in the grid.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from worthit.config import ConfigError, validate
from worthit.tune.space import VARIANT, Choices, engine_args, parse


def points(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every point of the ``tune:`` space (a continuous range is refused: the grid must be finite)."""
    section = parse(cfg, "grid")
    axes: list[list[Any]] = []
    for key, dim in section.space.items():
        if isinstance(dim, Choices):
            axes.append(list(dim.choices))
        elif dim.size() is None:
            raise ConfigError(f"grid: key 'tune.space.{key}': a continuous range has no grid (give a step)")
        else:
            axes.append(list(dim.values()))
    return [dict(zip(section.space, combo, strict=True)) for combo in itertools.product(*axes)]


def _name(i: int) -> str:
    return f"p{i:03d}"


def grid_study(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The study config measuring every point: one variant each, from the named base variant (``variant`` in
    the space picks it; else the first variant), its engine arguments overlaid with the point's."""
    out = {k: v for k, v in cfg.items() if k != "tune"}
    base = dict(cfg["variants"])
    first = next(iter(base))
    variants: dict[str, Any] = {}
    for i, p in enumerate(points(cfg)):
        src = dict(base[p.get(VARIANT, first)])
        src["engine_args"] = {**(src.get("engine_args") or {}), **engine_args(p)}
        src["experiments"] = ["loadtest"]
        src.pop("baseline", None)
        variants[_name(i)] = src
    out["variants"] = variants
    out["baseline_variant"] = _name(0)
    out["validate_deployments"] = False
    # the grid measures the concurrency levels only: levels and pairs naming the old variants go
    out["loadtest"] = {k: v for k, v in (cfg.get("loadtest") or {}).items() if k != "workload_levels"}
    out["specdec"] = {k: v for k, v in (cfg.get("specdec") or {}).items() if k != "draft_variants"}
    out["sweet_spot"] = {k: v for k, v in (cfg.get("sweet_spot") or {}).items() if k != "variants"}
    return out


def _figures(rows: list[dict[str, Any]], cfg: Mapping[str, Any]) -> dict[str, float]:
    ceiling = (cfg.get("decide") or {}).get("throughput_tpot_ms")
    slo = cfg.get("slo") or {}
    ok = [r for r in rows if r.get("status") == "ok"]
    under = [r for r in ok if ceiling is None or (r["tpot_ms_p50"] or 0) <= ceiling]
    meets = [
        r
        for r in ok
        if (r["ttft_ms_p99"] or 0) <= slo.get("ttft_ms", float("inf"))
        and (r["tpot_ms_p99"] or 0) <= slo.get("tpot_ms", float("inf"))
    ]
    return {
        "throughput": max((r["output_tok_per_s"] or 0.0 for r in under), default=0.0),
        "latency": float(max((r["concurrency"] for r in meets), default=0)),
    }


def collect(results: Path, grid_cfg: Mapping[str, Any], sidecar: Mapping[str, Any]) -> dict[str, Any]:
    """grid.json from the grid study's ``summary.parquet`` and ``cost.parquet``; ``sidecar``: its points file."""
    summary = pq.read_table(results / "summary.parquet").to_pylist()
    cost = {r["name"]: r for r in pq.read_table(results / "cost.parquet").to_pylist() if r["scope"] == "server"}
    runs = []
    for i, values in enumerate(sidecar["points"]):
        name = _name(i)
        rows = [r for r in summary if r["variant"] == name]
        by_run: dict[int, list[dict[str, Any]]] = {}
        for r in rows:
            by_run.setdefault(int(r.get("run") or 1), []).append(r)
        c = cost.get(name) or {}
        start_min = float(c.get("server_start_s") or 0.0) / 60
        serve_min = float(c.get("serving_s") or 0.0) / 60 / max(1, len(by_run))
        for run, rs in sorted(by_run.items()):
            runs.append(
                {"values": values, "run": run, **_figures(rs, grid_cfg), "server_minutes": start_min + serve_min}
            )
    return {"tune": dict(sidecar["tune"]), "defaults": dict(sidecar["defaults"]), "runs": runs}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("config", help="write the grid's study config")
    c.add_argument("study", type=Path)
    c.add_argument("--out", type=Path, required=True)
    k = sub.add_parser("collect", help="turn the grid study's results into grid.json")
    k.add_argument("results", type=Path)
    k.add_argument("--points", type=Path, required=True, help="the points file 'config' wrote")
    k.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    try:
        if a.cmd == "config":
            raw = yaml.safe_load(a.study.read_text())
            tune = dict(raw.get("tune") or {})
            defaults = tune.pop("defaults", None) or {}
            cfg = validate({**raw, "tune": tune}, source=str(a.study))
            study = grid_study(cfg)
            a.out.write_text(yaml.safe_dump(study, sort_keys=False))
            sidecar = {"tune": tune, "defaults": defaults, "points": points(cfg), "study": str(a.out)}
            a.out.with_suffix(".points.json").write_text(json.dumps(sidecar, indent=1) + "\n")
            print(f"{len(study['variants'])} points -> {a.out}")
        else:
            sidecar = json.loads(a.points.read_text())
            grid_cfg = validate(yaml.safe_load(Path(sidecar["study"]).read_text()), source=sidecar["study"])
            grid = collect(a.results, grid_cfg, sidecar)
            a.out.write_text(json.dumps(grid, indent=1) + "\n")
            print(f"{len(grid['runs'])} runs -> {a.out}")
    except ConfigError as e:
        print(f"grid: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
