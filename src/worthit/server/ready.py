"""Readiness, as a consumer sees it: wait for the server to answer, and tell a dead server from a failed request.

Consumers call :func:`wait_ready`: it waits for the state file and ``/health`` against a deadline and raises
:class:`~worthit.server.state.ServerFailed` with the server log's tail if the process died, or if the hardware
gate refused the variant (status ``not_applicable``, with the reason). A measurement whose requests failed
with the server's own errors asks :func:`failure_during` whether the server died meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worthit import secrets
from worthit.server.logs import log_tail, read_tail, startup_error
from worthit.server.state import ServerFailed, ServerState, alive, exit_path, process_start_time, read_json

# A consumer gives up when the server's state file stays absent this long (see wait_ready).
STATE_GONE_AFTER_S = 30.0
# A state file written during this consumer's life by a supervisor that is now dead: the server will never
# answer. The grace lets a restarted supervisor replace the file; the slack covers a supervisor that Snakemake
# started (and that wrote its state) a moment before this consumer's process.
DEAD_SUPERVISOR_GRACE_S = 3.0
DEAD_SUPERVISOR_SLACK_S = 5.0


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
    if not data or not alive(int(data.get("supervisor_pid", -1))):
        return None
    return ServerState(**data)


def _dead_supervisor_state(state_path: Path, not_before: float) -> ServerState | None:
    """The state in ``state_path`` if a supervisor wrote it at or after ``not_before`` and is now dead.

    A placeholder (``{}``) or a state left by an earlier run (written before this consumer started) is
    not this run's server: those keep a consumer waiting for the supervisor Snakemake is starting."""
    data = read_json(state_path)
    if not data.get("supervisor_pid") or alive(int(data["supervisor_pid"])):
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
    state_path: Path, *, deadline: float, timeout_s: float, poll_s: float, gone_after_s: float
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
            exit_file = exit_path(state_path)
            info = read_json(exit_file) if exit_file.exists() else {}
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
    state = _wait_for_supervisor(
        state_path, deadline=deadline, timeout_s=timeout_s, poll_s=poll_s, gone_after_s=gone_after_s
    )
    while True:
        exit_file = exit_path(state_path)
        if exit_file.exists() or not alive(state.pid) or not alive(state.supervisor_pid):
            _await_exit_record(exit_file, state)
            info = read_json(exit_file) if exit_file.exists() else {}
            if not info and not alive(state.supervisor_pid):
                raise _supervisor_gone(state, state_path)
            reason = info.get("reason") or (
                f"vLLM server for variant '{state.variant}' exited "
                f"(code {info.get('returncode', 'unknown')}) before it became ready"
            )
            if not info.get("reason") and (cause := startup_error(read_tail(state.log))):
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
    while not exit_file.exists() and alive(state.supervisor_pid) and time.monotonic() < deadline:
        time.sleep(0.2)


# A request's error that is the server's own, not the client's (HTTP 5xx, a stream the server ended with an
# error, a connection refused, reset or lost because the engine died), in the load generator's wording
# (worthit.loadgen.transports, worthit.loadgen.sse).
_SERVER_ERROR = re.compile(
    r"^HTTP 5\d\d|server error in stream|connection lost mid-response|ConnectionRefusedError|ConnectionResetError"
    r"|ServerDisconnectedError|ClientConnectorError|ClientOSError|Connect call failed|Cannot connect"
)


def server_errors(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The errors of ``rows`` (request records) that the server caused (:data:`_SERVER_ERROR`)."""
    return [str(r["error"]) for r in rows if r.get("error") and _SERVER_ERROR.search(str(r["error"]))]


def failure_during(
    state_path: str | os.PathLike[str], state: ServerState, errors: Sequence[str], *, n: int, wait_s: float = 20.0
) -> ServerFailed:
    """The failure a measurement records when the server failed some of its ``n`` requests with its own
    ``errors``: never evidence. Waits up to ``wait_s`` for the server either to be recorded dead (then the
    reason says it died, when, and the log's line) or to answer /health twice (it lives, and failed them)."""
    exit_file = exit_path(state_path)
    deadline = time.monotonic() + wait_s
    healthy, info = 0, {}
    while time.monotonic() < deadline:
        info = read_json(exit_file)
        if info.get("reason") and float(info.get("at", 0)) >= state.started_at:
            break
        info = {}
        ok = False
        if alive(state.pid):
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
