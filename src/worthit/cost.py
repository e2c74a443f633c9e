"""What a study cost: where its hours went (the ``study_cost`` table, results/<study>/cost.parquet).

Per server (each variant, each validated deployment): how long vLLM took to start (the supervisor's
``starting`` line to vLLM's ``Starting vLLM server on`` line of the last start in its log), how long it then
served (its measurements and the waits between them) until the supervisor was told to stop (its exit
record), and the GPU-minutes it held (lifetime x the GPUs it claimed; none for a server on the CPU).
Per stage (Snakemake rule): its jobs' wall and CPU time and peak memory from their benchmark files. Per
study: the totals. Beside each variant, the plan's estimate where a plan exists.

Functions over files' contents; the rule in workflow/rules/cost.smk finds the files. A missing file (a
job not run since benchmarks were recorded, a server that never started) leaves its figures null and says
so in ``note``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit import atomic, fmt, schemas
from worthit.report.views import INT, LONG, NUM, TEXT, Column, View

SCOPE_SERVER = "server"
SCOPE_STAGE = "stage"
SCOPE_STUDY = "study"
BENCHMARKS = "benchmarks"  # results/<study>/benchmarks/<rule>/<job>.tsv

_START = re.compile(r"^\[worthit\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) starting: ", re.M)
# vLLM's logger: "INFO 11-29 23:18:05 [api_server.py:616] Starting vLLM server on http://..." (no year)
_VLLM_TIME = re.compile(r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
_READY = re.compile(r"Starting vLLM (?:API )?server")
_DEVICE = re.compile(r"device_config=(\w+)")


def benchmark_path(results: str, rule: str, job: str) -> str:
    """Where a job's Snakemake benchmark file goes: ``results/<study>/benchmarks/<rule>/<job>.tsv``."""
    return f"{results}/{BENCHMARKS}/{rule}/{job}.tsv"


@dataclass(frozen=True)
class Benchmark:
    """One job's Snakemake benchmark record (the mean over its rows when the job was repeated)."""

    wall_s: float
    cpu_s: float | None
    max_rss_mib: float | None


def _number(cell: str) -> float | None:
    try:
        x = float(cell)
    except ValueError:  # "NA", "-" where psutil could not measure
        return None
    return x if math.isfinite(x) else None


def parse_benchmark(text: str) -> Benchmark | None:
    """A benchmark TSV (header ``s h:m:s max_rss ... cpu_time``, one row per repeat) -> its figures."""
    lines = [ln.split("\t") for ln in text.splitlines() if ln.strip()]
    if len(lines) < 2 or "s" not in lines[0]:
        return None
    head = lines[0]

    def mean(col: str) -> float | None:
        if col not in head:
            return None
        vals = [v for row in lines[1:] if len(row) == len(head) and (v := _number(row[head.index(col)])) is not None]
        return sum(vals) / len(vals) if vals else None

    wall = mean("s")
    return None if wall is None else Benchmark(wall, mean("cpu_time"), mean("max_rss"))


def read_benchmark(path: str | Path) -> Benchmark | None:
    try:
        return parse_benchmark(Path(path).read_text())
    except OSError:
        return None


@dataclass(frozen=True)
class ServerLog:
    """The last start recorded in a server's log (the supervisor appends every start to one file)."""

    started_at: dt.datetime | None  # the supervisor's "starting:" line
    ready_at: dt.datetime | None  # vLLM's "Starting vLLM server on" line: it listens from here on
    last_at: dt.datetime | None  # the last time-stamped vLLM line of that start
    device: str | None  # vLLM's device_config (cuda, cpu, ...)

    @property
    def start_s(self) -> float | None:
        if self.started_at is None or self.ready_at is None:
            return None
        return (self.ready_at - self.started_at).total_seconds()


def _vllm_time(m: re.Match[str], after: dt.datetime) -> dt.datetime:
    """A vLLM time stamp (month-day, no year) as the first such moment at or after ``after`` - 1 day."""
    month, day, hour, minute, second = (int(g) for g in m.groups())
    for year in (after.year, after.year + 1):
        try:
            t = dt.datetime(year, month, day, hour, minute, second)
        except ValueError:  # 02-29 in a common year
            continue
        if t >= after - dt.timedelta(days=1):
            return t
    return dt.datetime(after.year, month, day, hour, minute, second)


def parse_server_log(text: str) -> ServerLog:
    """Start, ready and last-line times of the last start in a supervisor log (``worthit.server``)."""
    starts = list(_START.finditer(text))
    if not starts:
        return ServerLog(None, None, None, None)
    started = dt.datetime.strptime(starts[-1].group(1), "%Y-%m-%d %H:%M:%S")
    block = text[starts[-1].end() :]
    ready = last = None
    for line in block.splitlines():
        m = _VLLM_TIME.search(line)
        if m is None:
            continue
        last = _vllm_time(m, started)
        if ready is None and _READY.search(line):
            ready = last
    device = _DEVICE.search(block)
    return ServerLog(started, ready, last, device.group(1) if device else None)


@dataclass(frozen=True)
class ServerFiles:
    """What the cost of one server is read from."""

    name: str  # the variant, or deployment~<scenario>
    log: str  # its supervisor log
    exit_record: str  # the supervisor's exit record (<state>.exit): when it was told to stop
    gpus: int  # GPUs it claims (the gpu resource)


def _exit_record(files: ServerFiles) -> dict[str, Any]:
    try:
        record = json.loads(Path(files.exit_record).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _stopped_at(record: Mapping[str, Any], log: ServerLog) -> tuple[dt.datetime | None, str]:
    """When the server stopped, and how that is known: the supervisor's exit record (written when it is told
    to stop, at the end of its group, or when its server exits), else the log's last time-stamped line (a
    lower bound: an idle vLLM logs nothing; the log file's mtime is no better once results are copied)."""
    at = record.get("at")
    if at is not None and log.started_at and (t := dt.datetime.fromtimestamp(float(at))) >= log.started_at:
        return t, "server log, exit record"
    return log.last_at, "server log, to its last time-stamped line"


def server_row(files: ServerFiles, planned_wall_s: float | None = None) -> dict[str, Any]:
    """One server's start time, serving time, lifetime and GPU-minutes.

    Not from a Snakemake benchmark file: a service job with one fails its group when the file is late,
    and the supervisor takes up to its stop grace (worthit.server.TERM_GRACE_S) to write it."""
    try:
        log = parse_server_log(Path(files.log).read_text(errors="replace"))
    except OSError:
        log = ServerLog(None, None, None, None)
    notes: list[str] = []
    record = _exit_record(files)
    stopped, source = _stopped_at(record, log)
    lifetime = (stopped - log.started_at).total_seconds() if stopped and log.started_at else None
    if lifetime is not None and source != "server log, exit record":
        notes.append("no exit record: lifetime to the log's last time-stamped line, a lower bound")
    if log.started_at is None:
        notes.append(f"no server start in {files.log}")
    elif log.ready_at is None:
        notes.append("the server never became ready")
    start_s = log.start_s
    serving = lifetime - start_s if lifetime is not None and start_s is not None else None
    gpus = 0 if log.device == "cpu" else files.gpus
    if log.device == "cpu":
        notes.append("served on the CPU: no GPU time")
    elif log.device is None and "gpu_devices" in record and not record["gpu_devices"]:
        # it exited before vLLM named its device, and the supervisor had no GPU to give it
        gpus = 0
        notes.append("no GPU was visible to the server: no GPU time")
    return {
        "scope": SCOPE_SERVER,
        "name": files.name,
        "wall_s": lifetime,
        "server_start_s": start_s,
        "serving_s": serving,
        "gpus": gpus,
        "gpu_minutes": lifetime * gpus / 60 if lifetime is not None else None,
        "planned_wall_s": planned_wall_s,
        "device": log.device,
        "source": source if log.started_at else None,
        "note": "; ".join(notes) or None,
    }


def stage_rows(files: Mapping[str, Iterable[str | Path]]) -> list[dict[str, Any]]:
    """Per rule, its jobs' benchmark files -> jobs, summed and longest wall time, CPU time, peak memory.

    Jobs of one rule may overlap (a variant's measurements wait for their turn on its server), so the
    summed wall time of a rule that runs beside others can exceed the time the study took."""
    rows = []
    for rule, paths in sorted(files.items()):
        benches = [b for p in paths if (b := read_benchmark(p)) is not None]
        if not benches:
            continue
        cpu = [b.cpu_s for b in benches if b.cpu_s is not None]
        rss = [b.max_rss_mib for b in benches if b.max_rss_mib is not None]
        rows.append(
            {
                "scope": SCOPE_STAGE,
                "name": rule,
                "jobs": len(benches),
                "wall_s": sum(b.wall_s for b in benches),
                "wall_s_max": max(b.wall_s for b in benches),
                "cpu_s": sum(cpu) if cpu else None,
                "max_rss_mib": max(rss) if rss else None,
                "source": "benchmark",
            }
        )
    return rows


def cost_rows(
    study: str,
    stage_files: Mapping[str, Iterable[str | Path]],
    servers: Sequence[ServerFiles],
    planned_wall_s: Mapping[str, float] | None = None,
) -> list[dict[str, Any]]:
    """The ``study_cost`` rows: every server, every stage with a benchmark, and the study's totals."""
    planned = planned_wall_s or {}
    server = [server_row(s, planned.get(s.name)) for s in servers]
    stages = stage_rows(stage_files)

    def total(rows: list[dict[str, Any]], key: str) -> float | None:
        vals = [r[key] for r in rows if r.get(key) is not None]
        return sum(vals) if vals else None

    study_row = {
        "scope": SCOPE_STUDY,
        "name": study,
        "jobs": sum(r["jobs"] for r in stages),
        "wall_s": total(stages, "wall_s"),
        "cpu_s": total(stages, "cpu_s"),
        "max_rss_mib": max((r["max_rss_mib"] for r in stages if r.get("max_rss_mib") is not None), default=None),
        "server_start_s": total(server, "server_start_s"),
        "serving_s": total(server, "serving_s"),
        "gpu_minutes": total(server, "gpu_minutes"),
        "planned_wall_s": total(server, "planned_wall_s"),
        "source": "sum of the rows above",
        "note": "wall_s sums every job's wall time: jobs that ran side by side count once each",
    }
    return [*server, *stages, study_row]


SERVER_COLUMNS = (
    ("name", "server"),
    ("server_start_s", "start s"),
    ("serving_s", "serving s"),
    ("wall_s", "lifetime s"),
    ("gpus", "GPUs"),
    ("gpu_minutes", "GPU-min"),
    ("planned_wall_s", "planned s"),
    ("note", "note"),
)
STAGE_COLUMNS = (
    ("name", "stage"),
    ("jobs", "jobs"),
    ("wall_s", "wall s"),
    ("wall_s_max", "longest job s"),
    ("cpu_s", "CPU s"),
    ("max_rss_mib", "peak RSS MiB"),
)


def markdown(rows: Sequence[Mapping[str, Any]], study: str) -> str:
    servers = [r for r in rows if r["scope"] == SCOPE_SERVER]
    stages = sorted((r for r in rows if r["scope"] == SCOPE_STAGE), key=lambda r: -(r.get("wall_s") or 0))
    tot = next((r for r in rows if r["scope"] == SCOPE_STUDY), {})

    return "\n".join(
        [
            f"# {study}: what the study cost",
            "",
            f"GPU-minutes {fmt.cell(tot.get('gpu_minutes'))}; server starts {fmt.cell(tot.get('server_start_s'))} s; "
            f"serving {fmt.cell(tot.get('serving_s'))} s; job wall time {fmt.cell(tot.get('wall_s'))} s over "
            f"{fmt.cell(tot.get('jobs', 0))} jobs (jobs that ran side by side each count).",
            "",
            "## Servers",
            "",
            "Start: the supervisor's start to vLLM listening; serving: from then to the server's stop (its "
            "measurements and the waits between them); lifetime: start to the supervisor's stop; GPU-minutes: "
            "lifetime x GPUs claimed; planned: the plan's estimate of start + measurements (lm-eval excluded).",
            "",
            fmt.markdown_table(servers, SERVER_COLUMNS),
            "",
            "## Stages",
            "",
            "Per Snakemake rule, from its jobs' benchmark files (results/<study>/benchmarks/).",
            "",
            fmt.markdown_table(stages, STAGE_COLUMNS),
            "",
        ]
    )


VIEW_COLUMNS = (
    Column("scope", "row", TEXT),
    Column("name", "server, stage or study", TEXT),
    Column("server_start_s", "start s", NUM, 0),
    Column("serving_s", "serving s", NUM, 0),
    Column("wall_s", "lifetime / wall s", NUM, 0),
    Column("gpu_minutes", "GPU-min", NUM, 1),
    Column("planned_wall_s", "planned s", NUM, 0),
    Column("jobs", "jobs", INT),
    Column("cpu_s", "CPU s", NUM, 0),
    Column("max_rss_mib", "peak RSS MiB", NUM, 0),
    Column("note", "note", LONG),
)


def view(rows: Sequence[Mapping[str, Any]]) -> View:
    """The ``study_cost`` rows as a report table: servers, then stages by wall time, then the totals."""
    order = {SCOPE_SERVER: 0, SCOPE_STAGE: 1, SCOPE_STUDY: 2}
    shown = sorted(
        rows, key=lambda r: (order.get(r["scope"], 3), -(r.get("wall_s") or 0) if r["scope"] == SCOPE_STAGE else 0)
    )
    return View(
        schemas.STUDY_COST,
        "What the study cost",
        "Per server: start (supervisor start to vLLM listening), serving (then to its stop: measurements and the "
        "waits between them), lifetime and GPU-minutes (lifetime x GPUs claimed), beside the plan's estimate. "
        "Per stage: its jobs' summed wall time (jobs side by side each count), CPU time and peak memory, from "
        "their Snakemake benchmark files; rendering this page is not in it.",
        VIEW_COLUMNS,
        [dict(r) for r in shown],
        order=98,
        empty="No cost recorded: no server log or benchmark file was found.",
    )


def write(
    rows: Sequence[Mapping[str, Any]], parquet: str | Path, md: str | Path, study: str, *, metadata: Mapping[str, Any]
) -> None:
    schemas.write(parquet, schemas.STUDY_COST, rows, metadata=metadata)
    atomic.write_text(md, markdown(rows, study))
