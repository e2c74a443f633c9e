"""The vLLM server of one variant: command line, supervision, readiness.

``supervise`` is what the Snakemake service job runs. It starts ``vllm serve`` in a session of its own
on a free loopback port, writes the state file (the service output) that consumers read, forwards
SIGTERM/SIGINT/SIGHUP to the server's whole process group, and kills it if Snakemake itself goes away.
When the server dies on its own (OOM, unsupported flag), the supervisor records the exit and stays up
until its group ends, so consumers record the failure as a result instead of the study crashing.

Consumers call :func:`wait_ready`: it waits for the state file and ``/health`` against a deadline and
raises :class:`ServerFailed` with the server log's tail if the process died. This module imports only
the standard library and worthit modules that do too (gating, atomic, engine_args, and quantize and
models at import time): it runs in whatever environment the rule gives it. Before starting, the hardware
gate may refuse a variant (e.g. fp8 KV below sm_89): the server never starts and consumers record
``not_applicable`` with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worthit import atomic, compile_cache, engine_args, gating, secrets
from worthit.quantize import manifest_status

TERM_GRACE_S = 20.0
# A server with no live consumer for this long stops by itself. Snakemake terminates a service when its
# consumers finish, but not when its group fails before the consumers start (e.g. an output folder
# cannot be made): then it would wait for the service forever.
ORPHAN_AFTER_S = float(os.environ.get("WORTHIT_ORPHAN_AFTER_S", "120"))
# A consumer gives up when the server's state file stays absent this long (see wait_ready).
STATE_GONE_AFTER_S = 30.0
# A state file written during this consumer's life by a supervisor that is now dead: the server will never
# answer. The grace lets a restarted supervisor replace the file; the slack covers a supervisor that Snakemake
# started (and that wrote its state) a moment before this consumer's process.
DEAD_SUPERVISOR_GRACE_S = 3.0
DEAD_SUPERVISOR_SLACK_S = 5.0
# Snakemake's local executor (9.x) runs a group in a thread pool that also holds the thread waiting for the
# group, so in a group as large as the pool one member starts only when the first one ends; after the first
# turn, a measurement that would overtake an earlier one holding no ticket waits this long for it (turn()).
LATE_MEMBER_SETTLE_S = float(os.environ.get("WORTHIT_LATE_MEMBER_SETTLE_S", "30"))


class ServerFailed(RuntimeError):
    """The server did not become ready: ``reason`` says why, ``log_tail`` shows its last lines."""

    def __init__(self, reason: str, log_tail: str = "", status: str = "failed") -> None:
        super().__init__(reason + (f"\n--- server log (tail) ---\n{log_tail}" if log_tail else ""))
        self.reason = reason
        self.log_tail = log_tail
        self.status = status  # "failed", or "not_applicable" when the hardware gate refused the variant


def engine_flags(args: Mapping[str, Any] | None, extra: Sequence[str] = ()) -> list[str]:
    """Engine arguments -> ``vllm serve`` flags, verbatim.

    ``{"max-model-len": 2048}`` -> ``--max-model-len 2048``; ``True`` -> the bare flag; ``False`` or
    ``None`` -> left out (so a variant can drop a default); dicts and lists -> JSON (e.g.
    ``--speculative-config``). ``extra`` is appended as given.
    """
    flags: list[str] = []
    for key, value in (args or {}).items():
        flag = "--" + engine_args.flag(key)
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, (dict, list)):
            flags += [flag, json.dumps(value, separators=(",", ":"))]
        else:
            flags += [flag, str(value)]
    return flags + list(extra)


def serve_command(
    python: str, model_dir: str, served_name: str, port: int, args: Mapping[str, Any] | None, extra: Sequence[str] = ()
) -> list[str]:
    return [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *engine_flags(args, extra),
    ]


def argv_command(python: str, argv: Sequence[str], port: int) -> tuple[list[str], str]:
    """A printed ``vllm serve MODEL --flag ...`` command, run as printed by the given environment's vLLM.

    ``vllm`` becomes that environment's console script (the same ``vllm`` a user would type after activating
    it); only the address is added (``--host 127.0.0.1 --port P``), which a printed command leaves to vLLM's
    defaults. Returns the command and the model name the server answers to (``--served-model-name``, else
    the model argument, as vLLM itself defaults it)."""
    argv = _without_key_flags(argv)
    if len(argv) < 3 or argv[0] != "vllm" or argv[1] != "serve":
        raise ValueError(f"not a 'vllm serve MODEL ...' command: {argv[:3]}")
    script = Path(python).parent / "vllm"
    head = [str(script)] if script.exists() else [python, "-m", "vllm.entrypoints.cli.main"]
    served = argv[2]
    for i, a in enumerate(argv):
        if a == "--served-model-name" and i + 1 < len(argv):
            served = argv[i + 1]
        elif a.startswith("--served-model-name="):
            served = a.split("=", 1)[1]
    return [*head, *argv[1:], "--host", "127.0.0.1", "--port", str(port)], served


def _without_key_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` less ``--api-key`` and its argument (a printed command shows ``--api-key "$VLLM_API_KEY"``):
    the supervisor gives vLLM the key in its environment instead (:func:`worthit.secrets.server_env`)."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--api-key":
            skip = True
        elif not a.startswith("--api-key="):
            out.append(a)
    return out


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(path: str | os.PathLike[str], lines: int = 40) -> str:
    return "\n".join(_read_tail(path, 64_000).splitlines()[-lines:])


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


def _read_tail(path: str | os.PathLike[str], size: int = 256_000) -> str:
    """The last ``size`` bytes of a file as text ('' when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - size))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


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


def _exit_path(state_path: str | os.PathLike[str]) -> Path:
    return Path(str(state_path) + ".exit")


def _group_path(state_path: str | os.PathLike[str]) -> Path:
    """Sidecar naming the running server's process group; removed on a clean stop (Snakemake may delete
    the state file itself, so the group is not recorded there)."""
    return Path(str(state_path) + ".group")


def _boot_time() -> float | None:
    try:
        return next(
            float(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime ")
        )
    except (OSError, StopIteration):
        return None


def process_start_time(pid: int | None = None) -> float | None:
    """When process ``pid`` (default: this one) started, in epoch seconds (Linux /proc; None elsewhere)."""
    btime = _boot_time()
    try:
        fields = Path(f"/proc/{pid or os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if btime is None else btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")


def _proc_group_members(pgid: int, not_before: float) -> dict[int, str]:
    """vLLM processes of process group ``pgid`` started after ``not_before`` (epoch s): pid -> command."""
    found: dict[int, str] = {}
    btime = _boot_time()
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
        if pid.isdigit() and not _alive(int(pid)):
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


def reap_leftover_group(
    state_path: str | os.PathLike[str], log_path: str | os.PathLike[str], grace_s: float = 10.0
) -> list[str]:
    """Stop what an earlier server of this variant left running, and return its command lines.

    A supervisor killed with SIGKILL (a hard job-time limit, the OOM killer, ``kill -9``) cannot stop its
    server; vLLM's engine core then lives on, re-parented to init, and keeps the GPU memory it holds, so
    the next start fails with "Free memory on device ... is less than desired GPU memory utilization"
    (seen on the H200). The group sidecar says which process group that server was: if its supervisor
    is gone, its vLLM processes are stopped before a new server starts."""
    side = _group_path(state_path)
    try:
        info = json.loads(side.read_text())
    except (OSError, ValueError):
        return []
    if _alive(int(info.get("supervisor_pid", -1))):
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


def _set_pdeathsig(sig: int = signal.SIGTERM) -> None:
    """In the child: be told when the supervisor dies (Linux; a no-op elsewhere).

    SIGTERM, not SIGKILL: Snakemake SIGKILLs a group's service when another member raises, and vLLM's API
    process, killed outright, leaves its engine processes (VLLM::EngineCore and its workers, in its process
    group) running for ever; on SIGTERM it shuts them down itself
    (tests/integration/test_no_server_outlives_pytest.py)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # PR_SET_PDEATHSIG


class ClaimAbandoned(Exception):
    """The wait for a free GPU ended because the supervisor was told to stop (:func:`_claim_gpus`)."""


def _claim_gpus(
    count: int, lock_dir: Path, give_up: Callable[[], str] = lambda: "", poll_s: float = 1.0
) -> tuple[str | None, list[Any]]:
    """Pick ``count`` free GPUs by holding one lock file per device (Snakemake hands out no device ids).

    Returns (CUDA_VISIBLE_DEVICES value, open lock handles). Leaves things alone where a scheduler
    (SLURM) or the user already set CUDA_VISIBLE_DEVICES, or where there is no NVIDIA GPU. While every
    device is held (the previous variant's server still stopping), it polls every ``poll_s``; ``give_up``
    returning a reason (a signal, Snakemake gone) ends the wait with :class:`ClaimAbandoned`.
    """
    if count <= 0 or "CUDA_VISIBLE_DEVICES" in os.environ or not shutil.which("nvidia-smi"):
        return os.environ.get("CUDA_VISIBLE_DEVICES"), []
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None, []
    total = sum(1 for line in out.splitlines() if line.startswith("GPU "))
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + 24 * 3600
    while True:
        held: list[Any] = []
        ids: list[int] = []
        for i in range(total):
            fh = open(lock_dir / f"gpu{i}.lock", "w")  # noqa: SIM115 - held for the server's life
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                fh.close()
                continue
            held.append(fh)
            ids.append(i)
            if len(ids) == count:
                return ",".join(map(str, ids)), held
        for fh in held:
            fh.close()
        if time.monotonic() > deadline or total < count:
            raise ServerFailed(f"needs {count} GPU(s); this machine has {total} and none are free")
        if why := give_up():
            raise ClaimAbandoned(f"while its supervisor waited for {count} free GPU(s), {why}")
        time.sleep(poll_s)


def _start(cmd: list[str], log_path: Path, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str | None]:
    """Start the server in a process group of its own, its output appended to ``log_path`` with every
    secret masked (:func:`_copy_redacted`), with a private IPC folder (:func:`private_ipc_dir`); return it
    and that folder."""
    ipc_dir = private_ipc_dir(env)
    key = env.get(secrets.SERVER_KEY_ENV)
    with open(log_path, "ab") as log:
        line = f"[worthit] {time.strftime('%F %T')} starting: {' '.join(cmd)}\n"
        log.write(secrets.redact_text(line, [key] if key else []).encode())
        log.flush()
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=_set_pdeathsig,
        )
    except BaseException:
        if ipc_dir:
            shutil.rmtree(ipc_dir, ignore_errors=True)
        raise
    assert proc.stdout is not None
    copier = threading.Thread(
        target=_copy_redacted, args=(proc.stdout, log_path, [key] if key else []), name="server-log", daemon=True
    )
    copier.start()
    proc.log_copier = copier  # type: ignore[attr-defined]
    return proc, ipc_dir


def _copy_redacted(pipe: Any, log_path: Path, extra: Sequence[str]) -> None:
    """Append the server's output to its log line by line, every secret masked (vLLM prints its arguments
    and, at debug level, parts of its environment as it starts: docs/security.md)."""
    with open(log_path, "ab") as log:
        for raw in iter(pipe.readline, b""):
            text = raw.decode(errors="replace")
            log.write(secrets.redact_text(text, extra).encode() if text.strip() else raw)
            log.flush()
    with contextlib.suppress(OSError):
        pipe.close()


def supervise(
    state_path: Path,
    log_path: Path,
    variant: str,
    model_dir: str,
    python: str,
    args: Mapping[str, Any] | None,
    extra: Sequence[str],
    env: Mapping[str, str],
    gpus: int = 0,
    devices: Sequence[gating.Gpu] | None = None,
    argv: Sequence[str] | None = None,
    api_key: Mapping[str, Any] | None = None,
) -> int:
    """Run the server until told to stop; return 0 after a clean stop.

    ``devices`` are the GPUs the hardware gate judges (None: ask nvidia-smi about the claimed ones).
    A variant the gate refuses is never started: the exit file says ``not_applicable`` and why.
    With ``argv`` (a printed ``vllm serve ...`` command: a recommended deployment) that command is served
    as printed (:func:`argv_command`) instead of one built from ``model_dir`` and ``args``.
    ``api_key``: where the server's key comes from (:func:`worthit.secrets.key_source`; None: VLLM_API_KEY);
    vLLM gets it as VLLM_API_KEY in its environment, never on its command line.
    """
    state_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    _exit_path(state_path).unlink(missing_ok=True)
    _placeholder(state_path)
    stopping = False
    stopping_signal: list[int] = []

    def on_signal(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        stopping_signal[:] = [signum]

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)

    parent = os.getppid()

    def told_to_stop() -> str:
        return _stop_reason(stopping, stopping_signal, parent)

    claimed = _claim_or_record(state_path, log_path, variant, gpus, told_to_stop)
    if claimed is None:  # told to stop while every GPU was held: nothing was started
        return 0
    cuda, locks = claimed
    port = free_port()
    served_name = variant
    if argv:
        cmd, served_name = argv_command(python, argv, port)
    else:
        cmd = serve_command(python, model_dir, variant, port, args, extra)
    child_env, key_error = _child_env(env, cuda, api_key)
    refused = gating.not_applicable(args, gating.detect_gpus(cuda) if devices is None else devices, model_dir)
    refused_status = "not_applicable"
    if key_error:
        refused, refused_status = key_error, "failed"
    if refused:
        return _refuse(
            state_path,
            log_path,
            variant,
            model_dir,
            cmd,
            port,
            refused,
            locks,
            lambda: stopping,
            parent,
            status=refused_status,
            gpus=cuda,
        )
    reap_leftover_group(state_path, log_path)
    compile_cache.share_model_info(child_env)
    for done in _queue_dir(state_path).glob("done-*"):  # turns of a killed earlier server (see turn)
        done.unlink(missing_ok=True)
    proc, ipc_dir = _start(cmd, log_path, child_env)
    _group_path(state_path).write_text(
        json.dumps({"pgid": proc.pid, "supervisor_pid": os.getpid(), "started_at": time.time() - 1, "ipc_dir": ipc_dir})
    )
    state = ServerState(
        variant=variant,
        url=f"http://127.0.0.1:{port}",
        port=port,
        pid=proc.pid,
        supervisor_pid=os.getpid(),
        log=str(log_path),
        model_dir=model_dir,
        served_model_name=served_name,
        command=cmd,
        started_at=time.time(),
        gpus=cuda,
    )
    atomic.write_text(state_path, json.dumps(secrets.redact(asdict(state)), indent=1))

    returncode: int | None = None
    watch = ConsumerWatch(state_path)
    ready = _Readiness(state.url)
    while not stopping:
        if watch.orphaned():
            with open(log_path, "ab") as log:
                log.write(f"[worthit] no consumer for {ORPHAN_AFTER_S:.0f}s: stopping the server\n".encode())
            break
        if returncode is None:
            ready.poll()
            returncode = proc.poll()
            if returncode is not None:
                _record_exit(state_path, log_path, proc, variant, returncode, cuda, ready.at)
        if os.getppid() != parent:  # Snakemake went away without telling us
            break
        time.sleep(0.25)
    why_stopped = told_to_stop()
    if why_stopped and returncode is None:
        # A consumer still waiting for this server learns at once why it will never answer.
        _exit_path(state_path).write_text(
            json.dumps(
                {
                    "returncode": None,
                    "status": "failed",
                    "at": time.time(),
                    "reason": f"the server for variant '{variant}' was stopped by its supervisor: {why_stopped}",
                    "gpu_devices": cuda,  # CUDA_VISIBLE_DEVICES it gave the server (None: no GPU; worthit.cost)
                }
            )
        )
    _stop_and_clean(proc, ipc_dir, state_path, locks)
    return 0


def _child_env(
    env: Mapping[str, str], cuda: str | None, api_key: Mapping[str, Any] | None
) -> tuple[dict[str, str], str | None]:
    """The server's environment (this one, the spec's ``env``, its GPUs, its key as VLLM_API_KEY), and why
    the key cannot be read (None: it can, or none is set)."""
    child_env = {**os.environ, **{k: str(v) for k, v in env.items()}}
    if cuda is not None:
        child_env["CUDA_VISIBLE_DEVICES"] = cuda
    try:
        return secrets.server_env(child_env, secrets.read_key(api_key)), None
    except secrets.SecretError as e:
        return child_env, str(e)


class _Readiness:
    """When the server first answered /health: the supervisor asks once a second until it does, so an exit
    after that is a death during the measurements, not a failed start (:func:`_record_exit`)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.at: float | None = None
        self._next = 0.0

    def poll(self) -> None:
        if self.at is not None or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + 1.0
        with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
            if http_get(self.url + "/health", timeout=2)[0] == 200:
                self.at = time.time()


def _clock(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


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


def died_reason(variant: str, returncode: int | None, at: float, ready_at: float, log_path: str | Path) -> str:
    """Why every measurement after a server's death fails: that it died during the measurements, when, and
    the log's own line."""
    line = death_line(_read_tail(log_path))
    return (
        f"the vLLM server of variant '{variant}' died during the measurements at {_clock(at)} "
        f"(exit code {returncode}; it had served since {_clock(ready_at)}): "
        + (line or f"its log names no cause (see {log_path})")
    )


def _record_exit(
    state_path: Path,
    log_path: Path,
    proc: subprocess.Popen[bytes],
    variant: str,
    returncode: int,
    cuda: str | None,
    ready_at: float | None,
) -> None:
    """The exit record of a server that stopped on its own; after it had served, with the reason every later
    consumer records (:func:`died_reason`)."""
    at = time.time()
    record: dict[str, Any] = {"returncode": returncode, "at": at, "gpu_devices": cuda}
    if ready_at is not None:
        copier = getattr(proc, "log_copier", None)
        if copier is not None:  # the server's last lines, which say why, reach the log first
            copier.join(timeout=3)
        record.update(
            status="failed", ready_at=ready_at, reason=died_reason(variant, returncode, at, ready_at, log_path)
        )
    with open(log_path, "ab") as log:
        log.write(f"[worthit] server exited with code {returncode}\n".encode())
    _exit_path(state_path).write_text(json.dumps(record))


# A request's error that is the server's own, not the client's (HTTP 5xx, a stream the server ended with an
# error, a connection refused, reset or lost because the engine died): worthit.loadgen.client's wording.
_SERVER_ERROR = re.compile(
    r"^HTTP 5\d\d|server error in stream|connection lost mid-response|ConnectionRefusedError|ConnectionResetError"
    r"|ServerDisconnectedError|ClientConnectorError|ClientOSError|Connect call failed|Cannot connect"
)


def server_errors(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The errors of ``rows`` (request records) that the server caused (:data:`_SERVER_ERROR`)."""
    return [str(r["error"]) for r in rows if r.get("error") and _SERVER_ERROR.search(str(r["error"]))]


def failure_during(
    state_path: str | os.PathLike[str], state: ServerState, errors: Sequence[str], n: int, wait_s: float = 20.0
) -> ServerFailed:
    """The failure a measurement records when the server failed some of its ``n`` requests with its own
    ``errors``: never evidence. Waits up to ``wait_s`` for the server either to be recorded dead (then the
    reason says it died, when, and the log's line) or to answer /health twice (it lives, and failed them)."""
    exit_file = _exit_path(state_path)
    deadline = time.monotonic() + wait_s
    healthy, info = 0, {}
    while time.monotonic() < deadline:
        info = _read_json(exit_file)
        if info.get("reason") and float(info.get("at", 0)) >= state.started_at:
            break
        info = {}
        ok = False
        if _alive(state.pid):
            with contextlib.suppress(OSError, urllib.error.URLError, ValueError):
                ok = http_get(state.url + "/health", timeout=2)[0] == 200
        healthy = healthy + 1 if ok else 0
        if healthy >= 2:
            break
        time.sleep(0.5)
    what = (
        f"{len(errors)} of {n} requests failed with the server's own errors (first: {errors[0][:200]})"
        if n
        else f"the server could not be reached ({errors[0][:200]})"
    )
    if info.get("reason"):
        return ServerFailed(
            f"{info['reason']}; in this measurement {what}: a measurement the server died in is no evidence",
            log_tail(state.log),
        )
    return ServerFailed(
        f"the vLLM server of variant '{state.variant}' failed requests: {what}; a measurement with server "
        f"errors is no evidence (see {state.log})",
        log_tail(state.log),
    )


def _placeholder(state_path: Path) -> None:
    """Snakemake removes a service's output as its job starts, and its group's consumers fail unless the
    file is back within --latency-wait (5 s): a placeholder goes there at once, before whatever may take
    longer (a GPU the previous variant's stopping server still holds, nvidia-smi). Consumers wait on a
    placeholder for the supervisor's own state (:func:`wait_ready`)."""
    if not state_path.exists():
        atomic.write_text(state_path, "{}")


def _stop_reason(stopping: bool, stopping_signal: Sequence[int], parent: int) -> str:
    """Why the supervisor stops ('' while nothing tells it to): a signal, or its parent gone."""
    if stopping:
        return f"it received {signal.Signals(stopping_signal[0]).name}" if stopping_signal else "it was stopped"
    return "its parent process (Snakemake, or the test run) went away" if os.getppid() != parent else ""


def _claim_or_record(
    state_path: Path, log_path: Path, variant: str, gpus: int, told_to_stop: Callable[[], str]
) -> tuple[str | None, list[Any]] | None:
    """The GPUs the server gets (:func:`_claim_gpus`), or None after recording (log, exit file) that the
    supervisor was told to stop while it waited for them."""
    try:
        return _claim_gpus(
            gpus, Path(os.environ.get("WORTHIT_GPU_LOCK_DIR", "/tmp/worthit-gpu-locks")), give_up=told_to_stop
        )
    except ClaimAbandoned as e:
        reason = f"the server for variant '{variant}' was not started: {e}"
        _record_not_started(state_path, log_path, reason, {"status": "failed", "reason": reason})
        return None


def _record_not_started(state_path: Path, log_path: Path, log_line: str, record: Mapping[str, Any]) -> None:
    """Say in the server log and the exit record (what consumers and worthit.cost read) why no server runs."""
    with open(log_path, "ab") as log:
        log.write(f"[worthit] {time.strftime('%F %T')} {log_line}\n".encode())
    _exit_path(state_path).write_text(json.dumps({"returncode": None, **record, "at": time.time()}))


def _stop_and_clean(proc: subprocess.Popen[bytes], ipc_dir: str | None, state_path: Path, locks: list[Any]) -> None:
    """Stop the server's process group, then remove what only it used: its IPC folder, the group sidecar,
    the GPU claims and the turn queue."""
    stop_process_group(proc)
    if ipc_dir:
        shutil.rmtree(ipc_dir, ignore_errors=True)
    _group_path(state_path).unlink(missing_ok=True)
    for fh in locks:
        fh.close()
    shutil.rmtree(str(state_path) + ".queue", ignore_errors=True)


def _refuse(
    state_path: Path,
    log_path: Path,
    variant: str,
    model_dir: str,
    cmd: list[str],
    port: int,
    reason: str,
    locks: list[Any],
    stopping: Callable[[], bool],
    parent: int,
    status: str = "not_applicable",
    gpus: str | None = None,
) -> int:
    """Do not start the server; tell consumers why (exit file, then state) and wait for the group's end.
    ``gpus``: the devices claimed for it (CUDA_VISIBLE_DEVICES; None: none), recorded for worthit.cost."""
    _record_not_started(
        state_path,
        log_path,
        f"not starting the server: {reason}",
        {"status": status, "reason": reason, "gpu_devices": gpus},
    )
    state = ServerState(
        variant=variant,
        url=f"http://127.0.0.1:{port}",
        port=port,
        pid=os.getpid(),
        supervisor_pid=os.getpid(),
        log=str(log_path),
        model_dir=model_dir,
        served_model_name=variant,
        command=cmd,
        started_at=time.time(),
    )
    atomic.write_text(state_path, json.dumps(secrets.redact(asdict(state)), indent=1))
    watch = ConsumerWatch(state_path)
    while not stopping() and os.getppid() == parent and not watch.orphaned():
        time.sleep(0.25)
    for fh in locks:
        fh.close()
    shutil.rmtree(str(state_path) + ".queue", ignore_errors=True)
    return 0


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


def _alive(pid: int) -> bool:
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


def http_get(url: str, timeout: float = 5.0, api_key: str | None = None) -> tuple[int, str]:
    """GET ``url`` (with ``api_key`` as a Bearer token): the status and the body ('' for an error status)."""
    req = urllib.request.Request(url, headers=secrets.auth_headers(api_key))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback only
            return resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, ""


def _live_state(state_path: Path) -> ServerState | None:
    """The state a running supervisor wrote, or None for a placeholder or a dead run's leftover."""
    try:
        data = json.loads(state_path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return None
    if not data or not _alive(int(data.get("supervisor_pid", -1))):
        return None
    return ServerState(**data)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _dead_supervisor_state(state_path: Path, not_before: float) -> ServerState | None:
    """The state in ``state_path`` if a supervisor wrote it at or after ``not_before`` and is now dead.

    A placeholder (``{}``) or a state left by an earlier run (written before this consumer started) is
    not this run's server: those keep a consumer waiting for the supervisor Snakemake is starting."""
    data = _read_json(state_path)
    if not data.get("supervisor_pid") or _alive(int(data["supervisor_pid"])):
        return None
    try:
        state = ServerState(**data)
    except TypeError:
        return None
    return state if state.started_at >= not_before else None


def _supervisor_gone(state: ServerState, state_path: Path) -> ServerFailed:
    return ServerFailed(
        f"the supervisor of variant '{state.variant}' (pid {state.supervisor_pid}), which wrote {state_path} "
        "during this run, is gone and left no exit record: it was killed (SIGKILL, the OOM killer, or its "
        f"process group was interrupted), so the server will not answer. See {state.log} and the Snakemake "
        "log, then rerun",
        log_tail(state.log),
    )


def _wait_for_supervisor(
    state_path: Path, deadline: float, timeout_s: float, poll_s: float, gone_after_s: float
) -> ServerState:
    """The state of this run's live supervisor, once it has written one (see :func:`wait_ready`)."""
    missing_since: float | None = None
    me_started = process_start_time() or time.time()
    dead_since: float | None = None
    while (state := _live_state(state_path)) is None:
        now = time.monotonic()
        dead = _dead_supervisor_state(state_path, not_before=me_started - DEAD_SUPERVISOR_SLACK_S)
        if dead is None:
            dead_since = None
        else:
            dead_since = dead_since or now
            exit_file = _exit_path(state_path)
            info = _read_json(exit_file) if exit_file.exists() else {}
            if info.get("reason") and float(info.get("at", 0)) >= dead.started_at:
                raise ServerFailed(info["reason"], log_tail(dead.log), status=info.get("status") or "failed")
            if now - dead_since > DEAD_SUPERVISOR_GRACE_S:
                raise _supervisor_gone(dead, state_path)
        if state_path.exists():
            missing_since = None
        elif missing_since is None:
            missing_since = now
        elif now - missing_since > gone_after_s:
            raise ServerFailed(
                f"the server state file {state_path} was removed: Snakemake ended the serve job "
                "(its group failed or was cancelled; see the Snakemake log)"
            )
        if now > deadline:
            raise ServerFailed(
                f"no running server for {state_path} after {timeout_s:.0f}s (did the serve job start? see its log)"
            )
        time.sleep(poll_s)
    return state


def wait_ready(
    state_path: str | os.PathLike[str],
    timeout_s: float = 600.0,
    poll_s: float = 1.0,
    gone_after_s: float = STATE_GONE_AFTER_S,
) -> ServerState:
    """Block until the server answers /health; raise :class:`ServerFailed` when it cannot.

    The state file exists from parse time on (placeholder) and is replaced atomically by the supervisor;
    absent for ``gone_after_s`` means Snakemake removed it because the serve job's group failed: waiting
    on would keep the server alive (this consumer counts as present) until the startup timeout."""
    deadline = time.monotonic() + timeout_s
    state_path = Path(state_path)
    state = _wait_for_supervisor(state_path, deadline, timeout_s, poll_s, gone_after_s)
    while True:
        exit_file = _exit_path(state_path)
        if exit_file.exists() or not _alive(state.pid) or not _alive(state.supervisor_pid):
            _await_exit_record(exit_file, state)
            info = _read_json(exit_file) if exit_file.exists() else {}
            if not info and not _alive(state.supervisor_pid):
                raise _supervisor_gone(state, state_path)
            reason = info.get("reason") or (
                f"vLLM server for variant '{state.variant}' exited "
                f"(code {info.get('returncode', 'unknown')}) before it became ready"
            )
            if not info.get("reason") and (cause := startup_error(_read_tail(state.log))):
                reason += f": {cause}"
            # "status" is set when the supervisor refused to start (hardware gate, manifest gate)
            raise ServerFailed(reason, log_tail(state.log), status=info.get("status") or "failed")
        try:
            status, _ = http_get(state.url + "/health", timeout=5)
            if status == 200:
                return state
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise ServerFailed(
                f"vLLM server for variant '{state.variant}' not ready after {timeout_s:.0f}s", log_tail(state.log)
            )
        time.sleep(poll_s)


def _await_exit_record(exit_file: Path, state: ServerState, wait_s: float = 8.0) -> None:
    """A server found dead before its supervisor wrote why: give the supervisor (which polls every 0.25 s and
    then lets the log's last lines in) the moment it needs, so the reason is its, not a guess."""
    deadline = time.monotonic() + wait_s
    while not exit_file.exists() and _alive(state.supervisor_pid) and time.monotonic() < deadline:
        time.sleep(0.2)


def _queue_dir(state_path: str | os.PathLike[str]) -> Path:
    return Path(str(state_path) + ".queue")


def _ticket(qdir: Path, index: int, name: str) -> Path:
    return qdir / f"{index:04d}-{os.getpid()}-{name.replace('/', '_')}"


@contextlib.contextmanager
def consumer_presence(state_path: str | os.PathLike[str], name: str, index: int | None = None) -> Iterator[None]:
    """Mark a consumer of the server as present (a file named after its pid) while it runs.

    With ``index``, also queue its turn right away: every consumer of a group starts at once and waits
    for the server, so by the time the server is ready all of them hold tickets and the first turn
    goes to the lowest index, not to whichever process happened to ask first."""
    qdir = _queue_dir(state_path)
    qdir.mkdir(parents=True, exist_ok=True)
    marker = qdir / f"consumer-{os.getpid()}"
    marker.write_text(name)
    ticket = _ticket(qdir, index, name) if index is not None else None
    if ticket:
        ticket.write_text(name)
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)
        if ticket:
            ticket.unlink(missing_ok=True)


class ConsumerWatch:
    """Tells the supervisor when its group has no live consumer for ORPHAN_AFTER_S."""

    def __init__(self, state_path: str | os.PathLike[str], idle_s: float | None = None) -> None:
        self.qdir = _queue_dir(state_path)
        self.idle_s = ORPHAN_AFTER_S if idle_s is None else idle_s
        self.last_seen = time.monotonic()
        self.next_check = 0.0

    def orphaned(self) -> bool:
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + 2.0
        with contextlib.suppress(OSError):
            for m in self.qdir.glob("consumer-*"):
                if _alive(int(m.name.split("-", 1)[1])):
                    self.last_seen = now
                    return False
        return now - self.last_seen > self.idle_s


@contextlib.contextmanager
def turn(
    state_path: str | os.PathLike[str],
    index: int,
    name: str,
    poll_s: float = 0.5,
    settle_s: float | None = None,
    measured: Collection[int] = (),
) -> Iterator[None]:
    """Hold the server for one measurement: measurements of a variant never overlap, and run in
    ``index`` order.

    Snakemake starts every consumer of a service group at once, so ordering through inputs is not
    possible. Each consumer registers a ticket (index + pid) and takes an exclusive lock when no live
    ticket with a lower index is waiting. Tickets of dead processes are ignored, so a crashed
    consumer never blocks the others. A finished turn leaves a ``done-<index>`` marker.

    One member may start late: Snakemake's local executor starts a group's jobs in a thread pool one
    thread short when the group is as large as the pool (``--cores 1``: six members or more), so that
    member starts only when the first measurement has ended. After the first turn, a consumer that would
    overtake a lower index holding neither a ticket nor a done marker waits up to ``settle_s`` for it
    (:data:`LATE_MEMBER_SETTLE_S`). ``measured``: lower indices whose results exist already (not part of this
    run), never waited for; one that is not requested costs that wait once per server.
    """
    settle = LATE_MEMBER_SETTLE_S if settle_s is None else settle_s
    qdir = _queue_dir(state_path)
    qdir.mkdir(parents=True, exist_ok=True)
    ticket = _ticket(qdir, index, name)
    ticket.write_text(name)
    lock = open(qdir / "lock", "w")  # noqa: SIM115 - closed in finally
    try:
        while True:
            if not _earlier_waiting(qdir, ticket, index) and not _late_member_expected(qdir, index, settle, measured):
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    pass
                else:
                    # A lower index's ticket may have appeared between the two checks above (a late member
                    # asking just then): with the lock held, no turn can start, so look once more.
                    if not _earlier_waiting(qdir, ticket, index):
                        break
                    fcntl.flock(lock, fcntl.LOCK_UN)
            time.sleep(poll_s)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):  # the supervisor stopped and removed the queue
                (qdir / f"done-{index:04d}").write_text(name)
    finally:
        ticket.unlink(missing_ok=True)
        lock.close()


def _tickets(qdir: Path) -> Iterator[tuple[int, int, Path]]:
    """(index, pid, path) of every ticket in the queue; none once the supervisor has removed the queue (it
    stopped: the waiting consumer then goes on to :func:`wait_ready`, which reads its exit record)."""
    try:
        entries = list(qdir.iterdir())
    except FileNotFoundError:
        return
    for t in entries:
        head, _, rest = t.name.partition("-")
        if head.isdigit():
            yield int(head), int(rest.split("-", 1)[0]), t


def _earlier_waiting(qdir: Path, ticket: Path, index: int) -> bool:
    return any(i < index and t != ticket and _alive(pid) for i, pid, t in _tickets(qdir))


def _late_member_expected(qdir: Path, index: int, settle_s: float, measured: Collection[int] = ()) -> bool:
    """After exactly one finished turn, is a lower index missing (no live ticket, no done marker) while the
    first turn ended less than ``settle_s`` ago? See :func:`turn`."""
    done = {int(d.name[5:]): d for d in qdir.glob("done-*") if d.name[5:].isdigit()}
    if len(done) != 1 or settle_s <= 0:
        return False
    (first,) = done.values()
    try:
        if time.time() - first.stat().st_mtime >= settle_s:
            return False
    except OSError:
        return False
    present = {i for i, pid, _ in _tickets(qdir) if _alive(pid)}
    return any(j not in done and j not in present and j not in measured for j in range(index))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m worthit.server", description="Supervise one variant's vLLM server (the serve rule)."
    )
    p.add_argument("--state", required=True, type=Path, help="state file to write (service output)")
    p.add_argument("--log", required=True, type=Path, help="server log")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--spec",
        help="JSON: variant, model_dir or manifest, python, args, extra, env, gpus; or argv (a printed "
        "'vllm serve ...' command to serve as printed); refuse: {status, reason} starts nothing",
    )
    src.add_argument("--spec-file", type=Path, help="a file holding that JSON")
    ns = p.parse_args(argv)
    spec = json.loads(ns.spec if ns.spec else ns.spec_file.read_text())
    manifest = json.loads(Path(spec["manifest"]).read_text()) if spec.get("manifest") else {}
    model_dir = spec["model_dir"] if "model_dir" in spec else manifest["model_dir"]
    status, reason = manifest_status(manifest)
    if spec.get("refuse"):  # nothing to serve (e.g. no deployment was recommended): say why, start nothing
        status, reason = spec["refuse"].get("status", "not_run"), spec["refuse"].get("reason", "")
    if status != "ok":  # e.g. a quantised model that failed its quality gate: never serve it
        stop: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: stop.append(1))
        return _refuse(
            ns.state,
            ns.log,
            spec["variant"],
            model_dir,
            [],
            0,
            reason
            if spec.get("refuse")
            else f"model '{manifest.get('name')}' of variant '{spec['variant']}' is not served "
            f"(model status {status}): {reason or 'no reason recorded'}",
            [],
            lambda: bool(stop),
            os.getppid(),
            status=status if spec.get("refuse") else "failed",
        )
    return supervise(
        ns.state,
        ns.log,
        spec["variant"],
        model_dir,
        spec["python"],
        spec.get("args"),
        spec.get("extra", []),
        spec.get("env", {}),
        int(spec.get("gpus", 0)),
        argv=spec.get("argv"),
        api_key=spec.get("api_key"),
    )


if __name__ == "__main__":
    sys.exit(main())
