"""What a server log says: the root cause of a failed start, and why a server died while it served.

vLLM wraps the real cause of a failed start in generic errors it logs last (:func:`startup_error` finds the
cause); a server that dies while serving logs why among its last lines (:func:`death_line`). Standard library
only.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path


def read_tail(path: str | os.PathLike[str], size: int = 256_000) -> str:
    """The last ``size`` bytes of a file as text ('' when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def log_tail(path: str | os.PathLike[str], lines: int = 40) -> str:
    """The last ``lines`` lines of a log."""
    return "\n".join(read_tail(path, 64_000).splitlines()[-lines:])


# A vLLM log line's origin and level prefix: "(EngineCore pid=12) ERROR 11-30 01:03:11 [core.py:1231] ".
_LOG_PREFIX = re.compile(r"^\([A-Za-z_:]+[^)]*\)\s*(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ \S+ \[[^\]]*\]\s*)?")
_EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Z]\w*(?:Error|Exception)): (.+)$")
_ARGPARSE_ERROR = re.compile(r"^\S+: error: (.+)$")


# Wrappers vLLM raises around the real cause, which it logs first.
_GENERIC_ERRORS = (
    "Engine core initialization failed",
    "EngineCore encountered an issue",
    "EngineDeadError",
    "See root cause above",
)


def startup_error(log_text: str) -> str | None:
    """The specific error of the last start attempt in a server log, e.g. ``ValueError: Free memory on
    device cuda:0 (9.71/139.8 GiB) on startup is less than desired GPU memory utilization ...`` or
    ``unrecognized arguments: --no-such-flag``; None when the log names none."""
    start = log_text.rfind("[worthit] ")
    while start > 0 and " starting: " not in log_text[start : log_text.find("\n", start)]:
        start = log_text.rfind("[worthit] ", 0, start)
    for raw in log_text[max(start, 0) :].splitlines():
        line = _LOG_PREFIX.sub("", raw.strip()).strip()
        if m := _ARGPARSE_ERROR.match(line):
            return m[1][:400]
        m = _EXCEPTION_LINE.match(line)
        if m and not any(g in line for g in _GENERIC_ERRORS):
            return f"{m[1]}: {m[2]}"[:400]
    return None


# What vLLM logs when a server that was serving loses its engine, most telling first
# (vllm/v1/engine/core_client.py: "engine core exited unexpectedly"; the executor's "died unexpectedly";
# core.py's "EngineCore encountered a fatal error"; the EngineDeadError requests then get).
_DEATH_PATTERNS = (
    re.compile(r"exited unexpectedly|died unexpectedly", re.IGNORECASE),
    re.compile(r"fatal error", re.IGNORECASE),
    re.compile(r"EngineDeadError|EngineCore encountered an issue|out of memory|OOM", re.IGNORECASE),
)


def death_line(log_text: str) -> str | None:
    """The log's own line saying why a server of the last start died while serving (e.g. ``[shutdown]
    MPClient: engine core exited unexpectedly; starting cleanup``), without vLLM's prefix; None when none."""
    start = log_text.rfind(" starting: ")
    lines = [_LOG_PREFIX.sub("", raw.strip()).strip() for raw in log_text[max(start, 0) :].splitlines()]
    for pattern in _DEATH_PATTERNS:
        for line in lines:
            if pattern.search(line) and not line.startswith("[worthit]"):
                return line[:300]
    return None


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def died_reason(variant: str, *, returncode: int | None, at: float, ready_at: float, log_path: str | Path) -> str:
    """Why every measurement after a server's death fails: that it died during the measurements, when, and
    the log's own line."""
    line = death_line(read_tail(log_path))
    return (
        f"the vLLM server of variant '{variant}' died during the measurements at {_clock(at)} "
        f"(exit code {returncode}; it had served since {_clock(ready_at)}): "
        + (line or f"its log names no cause (see {log_path})")
    )
