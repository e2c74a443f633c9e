"""The sweet-spot search on a variant's server: the grid's run-1 levels judged against the SLO, then
closed-loop probes between the last passing and the first failing level (:mod:`.search`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worthit import schemas
from worthit.config import Study
from worthit.experiments.loadtest.measure import study_level
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.experiments.sweet_spot import search
from worthit.experiments.sweet_spot.section import section
from worthit.experiments.sweet_spot.tables import SWEET_SPOT
from worthit.loadgen.levels import CONC, LoadLevel
from worthit.metrics import Slo, summarize
from worthit.models import Manifest
from worthit.server import ServerState, failure_during, server_errors
from worthit.stages import consume, result_meta

log = logging.getLogger("worthit")


def _sweet_row(variant: str, concurrency: int, source: str, probe: int, *, rows: Any, slo: Slo) -> dict[str, Any]:
    s = summarize(rows, slo)
    return {
        "variant": variant,
        "concurrency": concurrency,
        "source": source,
        "probe": probe,
        "meets_slo": bool(slo.level_met(s.ttft_ms.p99, s.tpot_ms.p99)) and s.n > s.n_errors,
        "n": s.n,
        "n_errors": s.n_errors,
        "ttft_ms_p50": s.ttft_ms.p50,
        "ttft_ms_p99": s.ttft_ms.p99,
        "tpot_ms_p50": s.tpot_ms.p50,
        "tpot_ms_p99": s.tpot_ms.p99,
        "output_tok_per_s": s.output_tok_per_s,
        "goodput_tok_per_s": s.goodput_tok_per_s,
    }


def sweet_spot(
    study: Study, variant: str, state_path: str, manifest_path: str, *, grid_files: Mapping[int, str], out: str
) -> None:
    """The SLO sweet-spot search of ``variant`` (:mod:`.search`): the grid's run-1 levels
    (``grid_files``: concurrency -> load file) judged against the SLO, then closed-loop probes on the
    variant's server between the last passing and the first failing level.

    The grid files are read in this measurement's turn, after the levels' (which come first in
    :meth:`worthit.config.Study.consumers` and write their file before passing the turn on): Snakemake starts
    every member of a server group at once, so they cannot be the rule's inputs. A level that is missing or
    failed is left out of the grid; with none left, the result says so (outcome no_grid)."""
    cfg = section(study.cfg)
    slo = Slo.from_config(study.cfg["slo"])
    manifest = Manifest.load(manifest_path)
    meta = result_meta(study, variant, manifest, slo=study.cfg["slo"], width=cfg.width)
    lt = load_section(study.cfg)

    def grid() -> tuple[list[dict[str, Any]], list[str]]:
        rows, left_out = [], []
        for c, path in sorted(grid_files.items()):
            res = schemas.read(path, LOAD_REQUESTS) if Path(path).exists() else None
            if res is not None and res.ok and res.table.num_rows:
                rows.append(_sweet_row(variant, c, "grid", 0, rows=res.table, slo=slo))
            else:
                left_out.append(f"{c} ({'not measured' if res is None else res.reason or res.status})")
        return rows, left_out

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        grid_rows, left_out = grid()
        if left_out:
            log.warning("sweet spot of %s: grid levels left out: %s", variant, ", ".join(left_out))
        probes: list[dict[str, Any]] = []

        def measure(c: int) -> bool:
            log.info("sweet spot of %s: probing concurrency %d", variant, c)
            run = study_level(
                study,
                variant,
                LoadLevel(CONC, c),
                state.url,
                served_model_name=state.served_model_name,
                tokenizer_dir=manifest.model_dir,
                run=1,
                seed_offset=3000,
            )
            if errs := server_errors(run.rows):  # a probe the server failed decides nothing
                raise failure_during(state_path, state, errs, n=len(run.rows))
            row = _sweet_row(variant, c, "search", len(probes) + 1, rows=run.rows, slo=slo)
            probes.append(row)
            log.info(
                "sweet spot of %s: concurrency %d %s the SLO (TTFT P99 %.1f ms, TPOT P99 %.1f ms)",
                variant,
                c,
                "meets" if row["meets_slo"] else "misses",
                row["ttft_ms_p99"] or -1,
                row["tpot_ms_p99"] or -1,
            )
            return bool(row["meets_slo"])

        found = search.search(
            [(int(r["concurrency"]), bool(r["meets_slo"])) for r in grid_rows],
            measure,
            cfg.width,
            cfg.max_probes,
        )
        log.info("sweet spot of %s: %s", variant, found.describe())
        extra = {
            "outcome": found.outcome,
            "lo": found.lo,
            "hi": found.hi,
            "description": found.describe() + (f"; grid levels left out: {', '.join(left_out)}" if left_out else ""),
            "workload": lt.workload,
        }
        return grid_rows + probes, extra

    consume(study, variant, "sweet_spot", out, table=SWEET_SPOT, state_path=state_path, meta=meta, body=body)
