"""Nothing a server starts outlives it: its process group, its IPC folder, and what a killed run left behind.

The supervisor stops the server's whole process group (:func:`stop_process_group`); the server learns of its
supervisor's death by a signal (:func:`set_pdeathsig`); a supervisor killed outright leaves its server's group
and IPC folder to the next start of the variant, which stops and removes them (:func:`reap_leftover_group`,
:func:`sweep_stale_ipc_dirs`).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from worthit.server.state import alive, boot_time, group_path

# How long a server's process group has to stop after SIGTERM before whatever is left gets SIGKILL.
TERM_GRACE_S = 20.0

# vLLM's API and engine processes talk over ZeroMQ IPC sockets it creates in VLLM_RPC_BASE_PATH (the system
# temp folder by default) and leaves behind when stopped by a signal: about four socket files a server start,
# thousands in /tmp after a day of studies. Each server gets a private folder instead, named after its
# supervisor's PID and removed when it stops; a supervisor killed before it could (SIGKILL, a Ctrl-C that
# Snakemake follows with a kill) leaves it to a later server start on the machine, which removes every such
# folder whose supervisor is gone (sweep_stale_ipc_dirs). A folder the user set is left alone.
IPC_ENV = "VLLM_RPC_BASE_PATH"
IPC_PREFIX = "worthit-ipc-"
IPC_STALE_AFTER_S = 900.0


def sweep_stale_ipc_dirs(base: str | None = None, min_age_s: float = IPC_STALE_AFTER_S) -> list[str]:
    """Remove the private IPC folders whose supervisor is gone; return them. Only folders untouched for
    ``min_age_s``: a supervisor in another PID namespace sharing this temp folder (a container) looks gone
    from here, and its server's sockets are made and connected in its first minutes."""
    gone = []
    now = time.time()
    for d in Path(base or tempfile.gettempdir()).glob(f"{IPC_PREFIX}*-*"):
        pid = d.name.removeprefix(IPC_PREFIX).split("-", 1)[0]
        with contextlib.suppress(OSError):
            if now - d.stat().st_mtime < min_age_s:
                continue
        if pid.isdigit() and not alive(int(pid)):
            shutil.rmtree(d, ignore_errors=True)
            gone.append(str(d))
    return gone


def private_ipc_dir(env: dict[str, str]) -> str | None:
    """Point ``env`` (a server's environment) at a new private IPC folder and return it; None when the
    environment already names one."""
    if env.get(IPC_ENV):
        return None
    sweep_stale_ipc_dirs()
    env[IPC_ENV] = tempfile.mkdtemp(prefix=f"{IPC_PREFIX}{os.getpid()}-")
    return env[IPC_ENV]


def _proc_group_members(pgid: int, not_before: float) -> dict[int, str]:
    """vLLM processes of process group ``pgid`` started after ``not_before`` (epoch s): pid -> command."""
    found: dict[int, str] = {}
    btime = boot_time()
    if btime is None:
        return found
    ticks = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError):
            continue
        started = btime + int(fields[19]) / ticks
        if int(fields[2]) == pgid and fields[0] != "Z" and started >= not_before - 5 and "vllm" in cmd.lower():
            found[int(pid)] = cmd[:120]
    return found


def reap_leftover_group(
    state_path: str | os.PathLike[str], log_path: str | os.PathLike[str], grace_s: float = 10.0
) -> list[str]:
    """Stop what an earlier server of this variant left running, and return its command lines.

    A supervisor killed with SIGKILL (a hard job-time limit, the OOM killer, ``kill -9``) cannot stop its
    server; vLLM's engine core then lives on, re-parented to init, and keeps the GPU memory it holds, so
    the next start fails with "Free memory on device ... is less than desired GPU memory utilization"
    (docs/hardware-results.md). The group sidecar says which process group that server was: if its
    supervisor is gone, its vLLM processes are stopped before a new server starts."""
    side = group_path(state_path)
    try:
        info = json.loads(side.read_text())
    except (OSError, ValueError):
        return []
    if alive(int(info.get("supervisor_pid", -1))):
        return []  # a running supervisor owns it
    pgid, started_at = int(info.get("pgid", -1)), float(info.get("started_at", 0))
    left = _proc_group_members(pgid, started_at) if pgid > 1 else {}
    if left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while _proc_group_members(pgid, started_at) and time.monotonic() < deadline:
            time.sleep(0.2)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with open(log_path, "ab") as log:
            log.write(
                f"[worthit] stopped {len(left)} process(es) an earlier, killed run of this server left "
                f"behind (process group {pgid}): {'; '.join(left.values())}\n".encode()
            )
    if info.get("ipc_dir"):
        shutil.rmtree(str(info["ipc_dir"]), ignore_errors=True)
    side.unlink(missing_ok=True)
    return list(left.values())


def set_pdeathsig(sig: int = signal.SIGTERM) -> None:
    """In the child: be told when the supervisor dies (Linux; a no-op elsewhere).

    SIGTERM, not SIGKILL: Snakemake SIGKILLs a group's service when another member raises, and vLLM's API
    process, killed outright, leaves its engine processes (VLLM::EngineCore and its workers, in its process
    group) running for ever; on SIGTERM it shuts them down itself
    (tests/integration/test_no_server_outlives_pytest.py)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG


def stop_process_group(proc: subprocess.Popen[bytes], grace_s: float = TERM_GRACE_S) -> None:
    """SIGTERM the server's process group, then SIGKILL whatever is left after the grace period."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    # vLLM's engine processes share the group; the API process may be gone while they linger.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    copier = getattr(proc, "log_copier", None)
    if copier is not None:  # the server's last lines reach its log
        copier.join(timeout=5)
