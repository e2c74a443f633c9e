"""Summarising a study's load files: `worthit.aggregate.summary_rows` (columns) against the row-by-row
reference it replaced (reference.py), on the same files, one after the other, each in a fresh process.

    python benchmarks/aggregation/run.py                 # make the files (once), time both, compare, report
    python benchmarks/aggregation/run.py --impl new      # only the current implementation

The files are seeded synthetic ``load_requests`` tables (default: 10 files x 100,000 requests, 2-14 output
tokens each so 7 inter-token gaps on average, 1% failed requests). Each timing runs in a child process that
reads and summarises every file; its wall time excludes the interpreter's start and imports, its peak
memory is the child's maximum resident set. The two implementations' rows must be identical.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT / "src"), str(HERE)]

SLO = {"ttft_ms": 2000.0, "tpot_ms": 100.0}


def make_files(folder: Path, files: int, rows: int, seed: int) -> list[Path]:
    """Write ``files`` load_requests tables of ``rows`` requests (skipped when they exist with that shape)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from worthit import schemas
    from worthit.experiments.loadtest.tables import LOAD_REQUESTS

    folder.mkdir(parents=True, exist_ok=True)
    stamp = folder / "shape.json"
    shape = {"files": files, "rows": rows, "seed": seed}
    paths = [folder / f"conc~{i + 1}.parquet" for i in range(files)]
    if stamp.exists() and json.loads(stamp.read_text()) == shape and all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(seed)
    for i, path in enumerate(paths):
        conc = i + 1
        success = rng.random(rows) >= 0.01
        tokens = np.where(success, rng.integers(2, 15, rows), 0)
        gaps_n = np.maximum(tokens - 1, 0)
        offsets = np.concatenate([[0], np.cumsum(gaps_n)]).astype(np.int32)
        gaps = rng.lognormal(np.log(40.0), 0.4, int(offsets[-1]))
        ttft = rng.lognormal(np.log(300.0 * conc**0.5), 0.5, rows)
        sums = np.add.reduceat(gaps, offsets[:-1]) if gaps.size else np.zeros(rows)
        e2e = ttft + np.where(gaps_n > 0, sums, 0.0)
        tpot = np.where(tokens >= 2, (e2e - ttft) / np.maximum(tokens - 1, 1), np.nan)
        start = np.sort(rng.random(rows)) * rows / (conc * 3.0)
        null = ~success
        cols = {
            "variant": pa.array(["synthetic"] * rows),
            "concurrency": pa.array(np.full(rows, conc, np.int32)),
            "request_rate_per_s": pa.nulls(rows, pa.float64()),
            "request_id": pa.array(np.arange(rows, dtype=np.int32)),
            "prompt_tokens": pa.array(np.full(rows, 512, np.int32)),
            "prompt_tokens_reported": pa.array(np.full(rows, 512, np.int32)),
            "output_tokens": pa.array(tokens.astype(np.int32)),
            "start_s": pa.array(start),
            "ttft_ms": pa.array(ttft, mask=null),
            "first_text_ms": pa.array(ttft, mask=null),
            "e2e_ms": pa.array(e2e, mask=null),
            "tpot_ms": pa.array(tpot, mask=null | (tokens < 2)),
            "itl_ms": pa.ListArray.from_arrays(pa.array(offsets), pa.array(gaps)),
            "chunks": pa.array(tokens.astype(np.int32)),
            "success": pa.array(success),
            "error": pa.array(np.where(success, None, "HTTP 500: synthetic failure").tolist(), pa.string()),
        }
        table = pa.table(cols, schema=LOAD_REQUESTS.schema)
        meta = {**(table.schema.metadata or {}), **schemas.io._encode_meta({"concurrency": conc, "n_warmup": 0})}
        pq.write_table(table.replace_schema_metadata(meta), path)
    stamp.write_text(json.dumps(shape))
    return paths


def child(impl: str, folder: Path) -> None:
    """Time one implementation over the files in ``folder``; print a JSON line with the result."""
    from worthit.metrics import Slo

    if impl == "new":
        from worthit.aggregate import summary_rows
    else:
        from reference import summary_rows  # type: ignore[no-redef]
    paths = sorted(str(p) for p in folder.glob("conc~*.parquet"))
    t0 = time.perf_counter()
    rows = summary_rows({}, {"synthetic": paths}, Slo(**SLO))
    wall = time.perf_counter() - t0
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"impl": impl, "wall_s": wall, "peak_rss_mib": peak_mib, "rows": rows}))


def timed(impl: str, folder: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", impl, "--dir", str(folder)], check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/worthit-aggregation-bench"))
    ap.add_argument("--files", type=int, default=10)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--impl", choices=["both", "new", "reference"], default="both")
    ap.add_argument("--repeats", type=int, default=3, help="timings of the new implementation (best and all kept)")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--child", choices=["new", "reference"], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child, a.dir)
        return
    t0 = time.perf_counter()
    make_files(a.dir, a.files, a.rows, a.seed)
    print(f"files: {a.files} x {a.rows:,} requests in {a.dir} ({time.perf_counter() - t0:.1f} s to make or check)")
    result: dict[str, Any] = {
        "files": a.files,
        "rows_per_file": a.rows,
        "seed": a.seed,
        "load_before": os.getloadavg(),
        "cpu": platform.processor() or platform.machine(),
        "nproc": os.cpu_count(),
    }
    new_rows = None
    if a.impl in ("both", "new"):
        runs = [timed("new", a.dir) for _ in range(a.repeats)]
        new_rows = runs[0]["rows"]
        result["new"] = {"wall_s": [r["wall_s"] for r in runs], "peak_rss_mib": [r["peak_rss_mib"] for r in runs]}
        print(
            f"new:       wall {min(result['new']['wall_s']):.2f} s (best of {a.repeats}), "
            f"peak RSS {max(result['new']['peak_rss_mib']):.0f} MiB"
        )
    if a.impl in ("both", "reference"):
        ref = timed("reference", a.dir)
        result["reference"] = {"wall_s": [ref["wall_s"]], "peak_rss_mib": [ref["peak_rss_mib"]]}
        print(f"reference: wall {ref['wall_s']:.2f} s, peak RSS {ref['peak_rss_mib']:.0f} MiB")
        if new_rows is not None:
            result["identical_rows"] = new_rows == ref["rows"]
            result["speedup"] = ref["wall_s"] / min(result["new"]["wall_s"])
            print(f"identical rows: {result['identical_rows']}; speed-up {result['speedup']:.1f}x")
    result["load_after"] = os.getloadavg()
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))
    if result.get("identical_rows") is False:
        sys.exit("the two implementations' rows differ")


if __name__ == "__main__":
    main()
