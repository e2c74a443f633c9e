"""Results -> the study's summary table (Parquet + Markdown).

Reads every variant's KV and load-level files through the schema module, reduces each level with
:mod:`worthit.metrics`, and writes one row per variant x level. Failed experiments become rows with
their status and reason, so the summary always has every variant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from worthit import schemas
from worthit.metrics import Slo, summarize


def _fmt(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and pd.isna(x)):
        return "–"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def summary_rows(kv_files: Mapping[str, str], load_files: Mapping[str, Sequence[str]],
                 slo: Slo) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for variant in dict.fromkeys([*kv_files, *load_files]):
        kv: dict[str, Any] = {}
        status, reason = schemas.STATUS_OK, None
        if variant in kv_files:
            res = schemas.read(kv_files[variant], schemas.KV_CACHE)
            if res.ok and res.table.num_rows:
                kv = res.table.to_pylist()[0]
            elif not res.ok:
                status, reason = res.status, res.reason
        kv_cols = {k: kv.get(k) for k in ("num_blocks", "kv_tokens", "kv_cache_gib", "critical_concurrency")}
        levels = list(load_files.get(variant, []))
        if not levels:
            rows.append({"variant": variant, "status": status, "reason": reason, **kv_cols})
        for path in levels:
            res = schemas.read(path, schemas.LOAD_REQUESTS)
            conc = res.metadata.get("concurrency")
            if not res.ok:
                rows.append({"variant": variant, "status": res.status, "reason": res.reason,
                             "concurrency": conc, **kv_cols})
                continue
            recs = res.table.to_pylist()
            s = summarize(recs, slo)
            rows.append({
                "variant": variant, "status": status, "reason": reason,
                "concurrency": conc if conc is not None else (recs[0]["concurrency"] if recs else None),
                "n": s.n, "n_errors": s.n_errors, "n_warmup": res.metadata.get("n_warmup"),
                "ttft_ms_p50": s.ttft_ms.p50, "ttft_ms_p99": s.ttft_ms.p99,
                "tpot_ms_p50": s.tpot_ms.p50, "tpot_ms_p99": s.tpot_ms.p99,
                "itl_ms_p50": s.itl_ms.p50, "e2e_ms_p50": s.e2e_ms.p50,
                "output_tok_per_s": s.output_tok_per_s, "requests_per_s": s.requests_per_s,
                "goodput_tok_per_s": s.goodput_tok_per_s, "goodput_requests_per_s": s.goodput_requests_per_s,
                "duration_s": s.duration_s, **kv_cols,
            })
    return rows


def markdown_table(df: pd.DataFrame, columns: Iterable[tuple[str, str]]) -> str:
    cols = list(columns)
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c, _ in cols) + " |")
    return "\n".join(lines)


SUMMARY_COLUMNS = (
    ("variant", "variant"), ("concurrency", "conc"), ("n", "n"), ("n_errors", "errors"),
    ("ttft_ms_p50", "TTFT P50 ms"), ("ttft_ms_p99", "TTFT P99 ms"), ("tpot_ms_p50", "TPOT P50 ms"),
    ("tpot_ms_p99", "TPOT P99 ms"), ("output_tok_per_s", "output tok/s"), ("requests_per_s", "req/s"),
    ("goodput_tok_per_s", "goodput tok/s"),
)
KV_COLUMNS = (("variant", "variant"), ("num_blocks", "KV blocks"), ("kv_tokens", "KV tokens"),
              ("kv_cache_gib", "KV GiB"), ("critical_concurrency", "critical concurrency"))


def write_summary(rows: list[dict[str, Any]], parquet: str | Path, md: str | Path, study: str,
                  metadata: Mapping[str, Any]) -> None:
    schemas.write(parquet, schemas.SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=schemas.SUMMARY.columns)
    ok = df[df["status"] == schemas.STATUS_OK]
    kv = df.drop_duplicates("variant")
    failed = df[df["status"] != schemas.STATUS_OK].drop_duplicates(["variant", "reason"])
    parts = [f"# {study}: summary", "", "## Load levels", "", markdown_table(ok, SUMMARY_COLUMNS), "",
             "## KV cache", "", markdown_table(kv, KV_COLUMNS), ""]
    if len(failed):
        parts += ["## Failed or not applicable", "",
                  markdown_table(failed, (("variant", "variant"), ("concurrency", "conc"),
                                          ("status", "status"), ("reason", "reason"))), ""]
    tmp = Path(str(md) + ".tmp")
    tmp.write_text("\n".join(parts))
    tmp.replace(md)
