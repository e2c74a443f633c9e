"""Check what the README's first command produced: every variant given a verdict, at least two optimisations
decided (adopt or reject: the embedded default must teach something), the report rendered.

Run by .ci/run after `snakemake --cores 1` on the embedded default study; exits 1 naming what is missing and,
when too few optimisations are decided, each one that is not, with its outcome, why and what would settle it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from worthit.config import Study, load
from worthit.report.decide import ADOPT, CONTROL, REJECT

ROOT = Path(__file__).resolve().parents[1]
# the verdicts that decide (report_verdicts.outcome), and how many of them the embedded default must reach
DECIDED = (ADOPT, REJECT)
MIN_DECIDED = 2


def undecided(rows: list[dict[str, Any]], minimum: int = MIN_DECIDED) -> list[str]:
    """Problems when fewer than ``minimum`` optimisations are decided (a control is no optimisation): how many
    were, then each optimisation that was not, with its outcome, its reason and what would settle it."""
    optimisations = [r for r in rows if r.get("outcome") != CONTROL]
    decided = [r for r in optimisations if r.get("outcome") in DECIDED]
    if len(decided) >= minimum:
        return []
    named = ", ".join(f"{r['variant']} ({r['outcome']})" for r in decided) or "none"
    out = [f"{len(decided)} optimisation(s) decided (adopt or reject), at least {minimum} expected: {named}"]
    for r in optimisations:
        if r.get("outcome") not in DECIDED:
            settle = f"; would settle it: {r['settle']}" if r.get("settle") else ""
            out.append(f"'{r['variant']}' not decided: {r['outcome']}: {r.get('reason') or 'no reason given'}{settle}")
    return out


def main(root: Path = ROOT) -> int:
    study = Study(load(root / "config" / "config.yaml"))
    baseline = str(study.cfg["baseline_variant"])
    results = root / "results" / study.name
    problems: list[str] = []
    verdicts_path = results / "report" / "verdicts.parquet"
    if not verdicts_path.exists():
        problems.append(f"{verdicts_path} is missing")
    else:
        rows = pq.read_table(verdicts_path).to_pylist()
        judged = {str(r["variant"]) for r in rows}
        for v in study.variants:
            if v != baseline and v not in judged:
                problems.append(f"{verdicts_path}: no verdict row for variant '{v}'")
        problems += [f"{verdicts_path}: {p}" for p in undecided(rows)]
    # every measurement of every variant (grid and workload levels, each run, the sweet spot, prefix lengths,
    # accuracy) is there: a result or a recorded failure, never a missing file
    for v in study.variants:
        for m in study.consumers(v):
            if not (results / f"variant~{v}" / f"{m}.parquet").exists():
                problems.append(f"{results / f'variant~{v}' / m}.parquet is missing")
    html = results / "report.html"
    if not html.exists() or html.stat().st_size < 10_000:
        problems.append(f"{html} is missing or nearly empty")
    else:
        page = html.read_text()
        problems += [f"{html} never names variant '{v}'" for v in study.variants if v not in page]
        if "<svg" not in page and "<img" not in page:
            problems.append(f"{html} holds no figure")
    for p in problems:
        print(f"check_study: {p}", file=sys.stderr)
    if not problems:
        print(f"check_study: {len(study.variants)} variants judged, at least {MIN_DECIDED} decided, rendered in {html}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
