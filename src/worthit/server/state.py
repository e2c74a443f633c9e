"""What a variant's supervisor and its consumers share: the state file, its sidecars, and whether a process lives.

The state file (the serve rule's service output) holds a :class:`ServerState`. Beside it lie the exit record
(``.exit``: why no server runs, or why it stopped), the running server's process group (``.group``: for the
clean-up after a killed run, :mod:`worthit.server.cleanup`) and the consumers' queue (``.queue/``: their
presence and their tickets, :mod:`worthit.server.turns`). Standard library only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ServerFailed(RuntimeError):
    """The server did not become ready: ``reason`` says why, ``log_tail`` shows its last lines."""

    def __init__(self, reason: str, log_tail: str = "", status: str = "failed") -> None:
        super().__init__(reason + (f"\n--- server log (tail) ---\n{log_tail}" if log_tail else ""))
        self.reason = reason
        self.log_tail = log_tail
        self.status = status  # "failed", or "not_applicable" when the hardware gate refused the variant


@dataclass
class ServerState:
    """What the service output holds: everything a consumer needs to reach the server."""

    variant: str
    url: str
    port: int
    pid: int
    supervisor_pid: int
    log: str
    model_dir: str
    served_model_name: str
    command: list[str]
    started_at: float
    gpus: str | None = None

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ServerState:
        return cls(**json.loads(Path(path).read_text()))


def exit_path(state_path: str | os.PathLike[str]) -> Path:
    return Path(str(state_path) + ".exit")


def group_path(state_path: str | os.PathLike[str]) -> Path:
    """Sidecar naming the running server's process group; removed on a clean stop (Snakemake may delete
    the state file itself, so the group is not recorded there)."""
    return Path(str(state_path) + ".group")


def queue_dir(state_path: str | os.PathLike[str]) -> Path:
    return Path(str(state_path) + ".queue")


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie is dead for our purposes
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def boot_time() -> float | None:
    """When the machine booted, in epoch seconds (Linux /proc; None elsewhere)."""
    try:
        return next(
            float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime ")
        )
    except (OSError, StopIteration):
        return None


def process_start_time(pid: int | None = None) -> float | None:
    """When process ``pid`` (default: this one) started, in epoch seconds (Linux /proc; None elsewhere)."""
    btime = boot_time()
    try:
        fields = Path(f"/proc/{pid or os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if btime is None else btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def forget_incomplete_marks(state_files: list[str], snakemake_dir: Path = Path(".snakemake")) -> None:
    """Remove the marks a Snakemake killed outright left on these state files.

    Snakemake marks every output of a running job incomplete (``.snakemake/incomplete/``: one file per output,
    named by the output's path in URL-safe base64) and removes the mark when the job ends. Killed outright
    (SIGKILL, a lost node, a cluster's grace spent), it leaves the marks, and ``--rerun-incomplete`` then forces
    those jobs. For a service output Snakemake 9 forces the server *alone*, without the consumers that need it:
    the server idles until its orphan timeout and the measurements never run, the study silently unfinished
    (examples/h200-qwen/README.md, "The tune on an H100"). A state file is rewritten by every server start, so
    its mark says nothing; the Snakefile removes it before Snakemake reads the marks. The format is Snakemake's
    own (``snakemake.persistence.file``, pinned in envs/workflow.txt): should it change, nothing is removed,
    and ``tests/workflow/test_service_lifecycle.py`` fails."""
    for f in state_files:
        name = base64.urlsafe_b64encode(str(f).encode()).decode()
        if len(name) >= 255:  # Snakemake splits a long name into folders; state files' names are short
            continue
        with contextlib.suppress(FileNotFoundError):
            (snakemake_dir / "incomplete" / name).unlink()
