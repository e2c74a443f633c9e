"""Check what the README's first command produced: every variant decided, the report rendered.

Run by .ci/run after `snakemake --cores 1` on the embedded default study; exits 1 naming what is missing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow.parquet as pq

from worthit.config import Study, load

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    study = Study(load(ROOT / "config" / "config.yaml"))
    baseline = str(study.cfg["baseline_variant"])
    results = ROOT / "results" / study.name
    problems: list[str] = []
    verdicts_path = results / "report" / "verdicts.parquet"
    if not verdicts_path.exists():
        problems.append(f"{verdicts_path} is missing")
    else:
        decided = {str(v) for v in pq.read_table(verdicts_path).column("variant").to_pylist()}
        for v in study.variants:
            if v != baseline and v not in decided:
                problems.append(f"{verdicts_path}: no verdict row for variant '{v}'")
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
        print(f"check_study: {len(study.variants)} variants decided and rendered in {html}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
