"""The supervisor: what the serve rule's service job runs for one variant.

:func:`supervise` starts ``vllm serve`` in a session of its own on a free loopback port, writes the state file
(the service output) that consumers read, forwards SIGTERM/SIGINT/SIGHUP to the server's whole process group,
and kills it if Snakemake itself goes away. When the server dies on its own (OOM, unsupported flag), the
supervisor records the exit and stays up until its group ends, so consumers record the failure as a result
instead of the study crashing. Before starting, the hardware gate may refuse a variant (e.g. fp8 KV below
sm_89): the server never starts and consumers record ``not_applicable`` with the reason.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from worthit import atomic, compile_cache, gating, jobenv, secrets, vllm_flags
from worthit.server.cleanup import private_ipc_dir, reap_leftover_group, set_pdeathsig, stop_process_group
from worthit.server.command import argv_command, serve_command
from worthit.server.logs import died_reason
from worthit.server.ready import http_get
from worthit.server.state import ServerFailed, ServerState, exit_path, group_path, queue_dir
from worthit.server.turns import ORPHAN_AFTER_S, ConsumerWatch


def free_port() -> int:
    """A loopback port free now (the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
            preexec_fn=set_pdeathsig,
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
    *,
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
    exit_path(state_path).unlink(missing_ok=True)
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

    claimed = _claim_or_record(state_path, log_path, variant=variant, gpus=gpus, told_to_stop=told_to_stop)
    if claimed is None:  # told to stop while every GPU was held: nothing was started
        return 0
    cuda, locks = claimed
    port = free_port()
    served_name = variant
    if argv:
        cmd, served_name = argv_command(python, argv, port)
    else:
        cmd = serve_command(python, model_dir, served_name=variant, port=port, args=args, extra=extra)
    child_env, key_error = _child_env(env, cuda, api_key)
    refused, refused_status = _refusal(
        args, gating.detect_gpus(cuda) if devices is None else devices, model_dir, python, log_path, argv, key_error
    )
    if refused:
        return refuse(
            state_path,
            log_path,
            variant=variant,
            model_dir=model_dir,
            cmd=cmd,
            port=port,
            reason=refused,
            locks=locks,
            stopping=lambda: stopping,
            parent=parent,
            status=refused_status,
            gpus=cuda,
        )
    reap_leftover_group(state_path, log_path)
    compile_cache.share_model_info(child_env)
    for done in queue_dir(state_path).glob("done-*"):  # a killed earlier server's turns (turns.turn)
        done.unlink(missing_ok=True)
    proc, ipc_dir = _start(cmd, log_path, child_env)
    group_path(state_path).write_text(
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
                _record_exit(
                    state_path, log_path, proc, variant=variant, returncode=returncode, cuda=cuda, ready_at=ready.at
                )
        if os.getppid() != parent:  # Snakemake went away without telling us
            break
        time.sleep(0.25)
    why_stopped = told_to_stop()
    if why_stopped and returncode is None:
        # A consumer still waiting for this server learns at once why it will never answer.
        exit_path(state_path).write_text(
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
    child_env = {**jobenv.restored(), **{k: str(v) for k, v in env.items()}}
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


def _record_exit(
    state_path: Path,
    log_path: Path,
    proc: subprocess.Popen[bytes],
    *,
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
        reason = died_reason(variant, returncode=returncode, at=at, ready_at=ready_at, log_path=log_path)
        record.update(status="failed", ready_at=ready_at, reason=reason)
    with open(log_path, "ab") as log:
        log.write(f"[worthit] server exited with code {returncode}\n".encode())
    exit_path(state_path).write_text(json.dumps(record))


def _placeholder(state_path: Path) -> None:
    """Snakemake removes a service's output as its job starts, and its group's consumers fail unless the
    file is back within --latency-wait (5 s): a placeholder goes there at once, before whatever may take
    longer (a GPU the previous variant's stopping server still holds, nvidia-smi). The serve rules write an
    empty one before Python starts (a loaded host can take longer than that to start it); this one covers a
    supervisor started otherwise. Consumers wait on a placeholder (empty or ``{}``) for the supervisor's own
    state (:func:`worthit.server.ready.wait_ready`)."""
    if not state_path.exists():
        atomic.write_text(state_path, "{}")


def _stop_reason(stopping: bool, stopping_signal: Sequence[int], parent: int) -> str:
    """Why the supervisor stops ('' while nothing tells it to): a signal, or its parent gone."""
    if stopping:
        return f"it received {signal.Signals(stopping_signal[0]).name}" if stopping_signal else "it was stopped"
    return "its parent process (Snakemake, or the test run) went away" if os.getppid() != parent else ""


def _claim_or_record(
    state_path: Path, log_path: Path, *, variant: str, gpus: int, told_to_stop: Callable[[], str]
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
    exit_path(state_path).write_text(json.dumps({"returncode": None, **record, "at": time.time()}))


def _stop_and_clean(proc: subprocess.Popen[bytes], ipc_dir: str | None, state_path: Path, locks: list[Any]) -> None:
    """Stop the server's process group, then remove what only it used: its IPC folder, the group sidecar,
    the GPU claims and the turn queue."""
    stop_process_group(proc)
    if ipc_dir:
        shutil.rmtree(ipc_dir, ignore_errors=True)
    group_path(state_path).unlink(missing_ok=True)
    for fh in locks:
        fh.close()
    shutil.rmtree(str(state_path) + ".queue", ignore_errors=True)


def _refusal(
    args: Mapping[str, Any] | None,
    devices: Sequence[gating.Gpu],
    model_dir: str,
    python: str,
    log_path: Path,
    argv: Sequence[str] | None,
    key_error: str | None,
) -> tuple[str, str]:
    """(why the server is not started, the status consumers record), ("", ...) to start it: the hardware
    gate (not applicable), then arguments vLLM would refuse or misread, then a missing API key (failed)."""
    if key_error:
        return key_error, "failed"
    refused = gating.not_applicable(args, devices, model_dir, python)
    if refused:
        return refused, "not_applicable"
    if not argv and (misread := _flag_problems(python, args, log_path)):
        return misread, "failed"
    return "", "not_applicable"


def _flag_problems(python: str, args: Mapping[str, Any] | None, log_path: Path) -> str:
    """Why vLLM would refuse or misread the engine arguments ``args`` (:func:`worthit.vllm_flags.problems`:
    a flag it does not declare, an abbreviation it would silently expand), checked against the serve env's own
    ``vllm serve --help=all`` before anything starts; "" when they are served as written, or when the flags
    cannot be read (then the server starts as configured and vLLM itself says what it refuses)."""
    if not args:
        return ""
    try:
        found = vllm_flags.served_flags(python)
    except vllm_flags.FlagsUnavailable as e:
        found, why = None, str(e)
    else:
        why = f"no vllm-*.dist-info in {python}'s environment or on PYTHONPATH"
    if found is None:
        with open(log_path, "a") as log:
            log.write(f"[worthit] engine arguments not checked against vLLM's flags: {why}\n")
        return ""
    version, accepted = found
    wrong = vllm_flags.problems(args, accepted, version=version)
    if not wrong:
        return ""
    return "; ".join(wrong) + ": correct the variant's engine_args (or serve.engine_args) in the study config"


def refuse(
    state_path: Path,
    log_path: Path,
    *,
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
