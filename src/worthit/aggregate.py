"""Results -> the study's summary table (Parquet + Markdown).

Reads every variant's KV and load-level files through the schema module, reduces each level with
:mod:`worthit.metrics` (as Arrow columns, not rows), and writes one row per variant x level. Failed
experiments become rows with their status and reason, so the summary always has every variant.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from worthit import atomic, energy, fmt, prom, schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import ENERGY_COLUMNS, LOAD_REQUESTS, SUMMARY
from worthit.loadgen.levels import summary_columns
from worthit.loadgen.repetition import level_repetition
from worthit.metrics import Slo, summarize


def summary_rows(
    kv_files: Mapping[str, str], load_files: Mapping[str, Sequence[str]], slo: Slo
) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for variant in dict.fromkeys([*kv_files, *load_files]):
        kv: dict[str, Any] = {}
        status, reason = schemas.STATUS_OK, None
        if variant in kv_files:
            res = schemas.read(kv_files[variant], KV_CACHE)
            if res.ok and res.table.num_rows:
                kv = res.table.to_pylist()[0]
            elif not res.ok:
                status, reason = res.status, res.reason
        kv_cols = {k: kv.get(k) for k in ("num_blocks", "kv_tokens", "kv_cache_gib", "critical_concurrency")}
        levels = list(load_files.get(variant, []))
        if not levels:
            rows.append({"variant": variant, "status": status, "reason": reason, **kv_cols})
        level_rows: list[dict[str, Any]] = []
        for path in levels:
            res = schemas.read(path, LOAD_REQUESTS)
            conc, run = res.metadata.get("concurrency"), int(res.metadata.get("repeat") or 1)
            if not res.ok:
                level_rows.append(
                    {
                        "variant": variant,
                        "status": res.status,
                        "reason": res.reason,
                        "concurrency": conc,
                        "run": run,
                        **kv_cols,
                        **summary_columns(res.metadata),
                    }
                )
                continue
            s = summarize(res.table, slo)
            rep = level_repetition(res.table.column("repeated_ngram_share").to_pylist())
            first_conc = res.table.column("concurrency")[0].as_py() if res.table.num_rows else None
            level = summary_columns(res.metadata)
            undelivered = level.get("rate_delivered") is False  # an open-loop rate the client fell short of
            traffic = res.metadata.get("traffic")
            shared = isinstance(traffic, dict) and bool(traffic.get("shared"))  # another client on the server
            level_rows.append(
                {
                    "variant": variant,
                    "status": schemas.STATUS_FAILED if shared else status,
                    "reason": prom.traffic_reason(traffic)  # type: ignore[arg-type]
                    if shared
                    else (res.metadata.get("rate_reason") if undelivered else reason),
                    "concurrency": conc if conc is not None else first_conc,
                    "run": run,
                    "n": s.n,
                    "n_errors": s.n_errors,
                    "n_warmup": res.metadata.get("n_warmup"),
                    "ttft_ms_p50": s.ttft_ms.p50,
                    "ttft_ms_p99": s.ttft_ms.p99,
                    "tpot_ms_p50": s.tpot_ms.p50,
                    "tpot_ms_p99": s.tpot_ms.p99,
                    "itl_ms_p50": s.itl_ms.p50,
                    "e2e_ms_p50": s.e2e_ms.p50,
                    "output_tok_per_s": s.output_tok_per_s,
                    "requests_per_s": s.requests_per_s,
                    "goodput_tok_per_s": s.goodput_tok_per_s,
                    "goodput_requests_per_s": s.goodput_requests_per_s,
                    "duration_s": s.duration_s,
                    "repeated_ngram_share_p50": rep.repeated_ngram_share_p50,
                    "looping_share": rep.looping_share,
                    **level_energy(res.metadata),
                    **kv_cols,
                    **level,
                }
            )
        # runs of a level next to each other (they are measured round after round)
        rows += sorted(level_rows, key=lambda r: (r["concurrency"] or 0, r["run"]))
    return rows


def level_energy(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A level's energy columns from its metadata (worthit.energy); a level recorded without readings says so."""
    e = metadata.get("energy")
    if not isinstance(e, Mapping):
        return {**{c.name: None for c in ENERGY_COLUMNS}, "energy_reason": energy.NOT_RECORDED}
    return {c.name: e.get(c.name) for c in ENERGY_COLUMNS}


def markdown_table(df: pd.DataFrame, columns: Iterable[tuple[str, str]]) -> str:
    """A DataFrame's rows as a Markdown table (cells as :func:`worthit.fmt.cell` writes them)."""
    return fmt.markdown_table(df.to_dict("records"), columns)


def failures_section(failed: pd.DataFrame, setting: tuple[str, str]) -> list[str]:
    """The Markdown section listing failed or not-applicable rows (nothing when there are none)."""
    if not len(failed):
        return []
    cols = (("variant", "variant"), setting, ("status", "status"), ("reason", "reason"))
    return ["## Failed or not applicable", "", markdown_table(failed, cols), ""]


def write_markdown(path: str | Path, parts: list[str]) -> None:
    """Write a Markdown page atomically (temp file, then rename)."""
    atomic.write_text(path, "\n".join(parts))


SUMMARY_COLUMNS = (
    ("variant", "variant"),
    ("concurrency", "conc"),
    ("n", "n"),
    ("n_errors", "errors"),
    ("ttft_ms_p50", "TTFT P50 ms"),
    ("ttft_ms_p99", "TTFT P99 ms"),
    ("tpot_ms_p50", "TPOT P50 ms"),
    ("tpot_ms_p99", "TPOT P99 ms"),
    ("output_tok_per_s", "output tok/s"),
    ("requests_per_s", "req/s"),
    ("goodput_tok_per_s", "goodput tok/s"),
    ("repeated_ngram_share_p50", "repeated 4-grams P50"),
    ("looping_share", "loops"),
    ("energy_j_per_output_token", "J/output token"),
)
KV_COLUMNS = (
    ("variant", "variant"),
    ("num_blocks", "KV blocks"),
    ("kv_tokens", "KV tokens"),
    ("kv_cache_gib", "KV GiB"),
    ("critical_concurrency", "critical concurrency"),
)


OPEN_LOOP_COLUMNS = (
    ("variant", "variant"),
    ("level", "level"),
    ("run", "run"),
    ("request_rate_per_s", "target req/s"),
    ("achieved_rate_per_s", "achieved req/s"),
    ("queue_delay_ms_p50", "client queue P50 ms"),
    ("queue_delay_ms_p99", "client queue P99 ms"),
    ("rate_delivered", "delivered"),
    ("reason", "why not"),
)


def energy_note(ok: pd.DataFrame) -> list[str]:
    """Why the J/output token column is empty where it is (worthit.energy): each distinct reason once."""
    if "energy_reason" not in ok:
        return []
    reasons = [str(r) for r in ok.loc[ok["energy_j_per_output_token"].isna(), "energy_reason"].dropna().unique()]
    return [f"Energy per output token: {'; '.join(reasons)}.", ""] if reasons else []


def open_loop_section(ok: pd.DataFrame) -> list[str]:
    """Open-loop levels: the rate asked for, the rate the client achieved, its queueing delay, and whether
    it delivered the level (one it did not deliver measured a lower rate than its name says)."""
    rates = ok[ok["rate_delivered"].notna()]
    if not len(rates):
        return []
    return ["## Open-loop levels", "", markdown_table(rates, OPEN_LOOP_COLUMNS), ""]


def write_summary(
    rows: list[dict[str, Any]], parquet: str | Path, md: str | Path, study: str, *, metadata: Mapping[str, Any]
) -> None:
    schemas.write(parquet, SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=SUMMARY.columns)
    # counts stay integers in the Markdown even where a failed variant leaves them empty
    for col in ("concurrency", "run", "n", "n_errors", "n_warmup", "num_blocks", "kv_tokens"):
        df[col] = df[col].astype("Int64")
    ok = df[df["status"] == schemas.STATUS_OK]
    kv = df.drop_duplicates("variant")
    failed = df[df["status"] != schemas.STATUS_OK].drop_duplicates(["variant", "reason"])
    columns: tuple[tuple[str, str], ...] = SUMMARY_COLUMNS
    if (df["run"].fillna(1) > 1).any():  # repeated levels: one row per run, the spread is in plain sight
        columns = (*SUMMARY_COLUMNS[:2], ("run", "run"), *SUMMARY_COLUMNS[2:])
    if df["level"].notna().any():  # levels other than plain concurrencies: each named
        columns = (columns[0], ("level", "level"), *columns[1:])
    parts = [
        f"# {study}: summary",
        "",
        "## Load levels",
        "",
        markdown_table(ok, columns),
        "",
        *energy_note(ok),
        *open_loop_section(ok),
        "## KV cache",
        "",
        markdown_table(kv, KV_COLUMNS),
        "",
    ]
    write_markdown(md, parts + failures_section(failed, ("concurrency", "conc")))


# ---------------------------------------------------------------------------------------------- accuracy
