"""The vLLM server of one variant: its command line, its supervisor, its readiness, its consumers' turns.

* :mod:`~worthit.server.command`: the ``vllm serve`` command line a variant's engine arguments make;
* :mod:`~worthit.server.supervisor`: what the serve rule runs (``python -m worthit.server``, the
  :mod:`~worthit.server.__main__` module): it starts the server, writes the state file, and stops the server
  when told to, when Snakemake goes away, or when no consumer is left;
* :mod:`~worthit.server.cleanup`: how nothing the server starts outlives it, even after a killed supervisor;
* :mod:`~worthit.server.ready`: how a consumer waits for the server (:func:`wait_ready`) and tells a server
  that died from requests that failed (:func:`failure_during`);
* :mod:`~worthit.server.turns`: the consumers' presence, and the ticket lock that runs a variant's
  measurements one at a time, in order (:func:`turn`);
* :mod:`~worthit.server.state` and :mod:`~worthit.server.logs`: the state file and its sidecars, and what a
  server log says.

These modules import only the standard library and worthit modules that do too (gating, atomic, engine_args,
compile_cache, secrets; the command line also quantize and models): the supervisor runs in whatever
environment the rule gives it. The names below are the package's interface.
"""

from worthit.server.cleanup import (
    IPC_ENV,
    IPC_PREFIX,
    IPC_STALE_AFTER_S,
    TERM_GRACE_S,
    private_ipc_dir,
    reap_leftover_group,
    stop_process_group,
    sweep_stale_ipc_dirs,
)
from worthit.server.command import argv_command, engine_flags, serve_command
from worthit.server.logs import death_line, died_reason, log_tail, startup_error
from worthit.server.ready import failure_during, http_get, server_errors, wait_ready
from worthit.server.state import ServerFailed, ServerState, process_start_time
from worthit.server.supervisor import ClaimAbandoned, free_port, supervise
from worthit.server.turns import ConsumerWatch, consumer_presence, turn

__all__ = [
    "IPC_ENV",
    "IPC_PREFIX",
    "IPC_STALE_AFTER_S",
    "TERM_GRACE_S",
    "ClaimAbandoned",
    "ConsumerWatch",
    "ServerFailed",
    "ServerState",
    "argv_command",
    "consumer_presence",
    "death_line",
    "died_reason",
    "engine_flags",
    "failure_during",
    "free_port",
    "http_get",
    "log_tail",
    "private_ipc_dir",
    "process_start_time",
    "reap_leftover_group",
    "serve_command",
    "server_errors",
    "startup_error",
    "stop_process_group",
    "supervise",
    "sweep_stale_ipc_dirs",
    "turn",
    "wait_ready",
]
