"""What every measurement on a variant's server shares (the service group's consumers; each experiment's own
measurement is in its folder of :mod:`worthit.experiments`).

A measurement runs through :func:`consume`: it waits for the server, takes its turn, measures, and writes one
Parquet file. When the server cannot serve (it died, never became ready, lacks a capability) it writes a
failure record instead of raising, so one variant's failure is a row in the report and never a crashed study.
Beside it: the rule's logging (:func:`setup_logging`), the server's /metrics (:func:`scrape`,
:func:`counters`), the results' metadata (:func:`result_meta`) and a stop request (:func:`stop_on_request`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Collection, Iterator
from pathlib import Path
from typing import Any

from worthit import errors, jobenv, prom, schemas, secrets
from worthit.config import Study, config_hash
from worthit.loadgen.client import REFUSED_STATUSES, Refused
from worthit.models import Manifest
from worthit.provenance import stamp
from worthit.server import (
    ServerFailed,
    ServerState,
    consumer_presence,
    failure_during,
    http_get,
    server_errors,
    turn,
    wait_ready,
)

log = logging.getLogger("worthit")


def setup_logging(path: str | None) -> None:
    """Log to the rule's log file; a bad input (:class:`worthit.errors.InputError`) ends the script with
    its message there and on stderr, without a traceback. Every script adapter calls it first, so it also
    gives the job back the user's thread-count variables (:func:`worthit.jobenv.restore_here`) before a
    measurement loads a tokenizer (and with it torch, which reads them as it loads)."""
    jobenv.restore_here()
    errors.install_hook()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handlers = [logging.FileHandler(path, mode="w")]
    for h in handlers:  # nothing secret reaches a log (docs/security.md)
        h.setFormatter(secrets.RedactingFormatter("%(asctime)s %(levelname)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=handlers, force=True)


def scrape(url: str, api_key: str | None = None) -> str:
    status, body = http_get(url.rstrip("/") + "/metrics", timeout=30, api_key=api_key)
    if status in REFUSED_STATUSES:
        raise ServerFailed(secrets.auth_failure(status, url.rstrip("/") + "/metrics", api_key))
    if status != 200:
        raise ServerFailed(f"GET /metrics answered HTTP {status}")
    return body


def counters(url: str, api_key: str | None = None) -> dict[str, float]:
    """The server's watched counters now (:data:`worthit.prom.WATCHED_COUNTERS`), summed over labels."""
    return prom.counters(scrape(url, api_key), prom.WATCHED_COUNTERS)


def check_access(url: str, api_key: str | None) -> None:
    """Raise :class:`ServerFailed` naming the cause and the fix when the server refuses this client (HTTP
    401/403 on ``GET /v1/models``, which vLLM guards with its API key): every measurement asks first, so none
    runs, and none is recorded as evidence, without the key."""
    status, _ = http_get(url.rstrip("/") + "/v1/models", timeout=30, api_key=api_key)
    if status in REFUSED_STATUSES:
        raise ServerFailed(secrets.auth_failure(status, url.rstrip("/") + "/v1/models", api_key))


def refused(e: Refused, api_key: str | None) -> ServerFailed:
    """A level the server refused (:class:`worthit.loadgen.client.Refused`) as the failure it records."""
    return ServerFailed(secrets.auth_failure(e.status, e.url, api_key) + f" (the server said: {e.detail[:200]})")


def result_meta(study: Study, variant: str, manifest: Manifest, **extra: Any) -> dict[str, Any]:
    """The provenance every measurement of ``variant`` records: the served model, the engine arguments,
    the server's environment variables (``serve.env`` and ``variants.<v>.env``: vLLM selects some things
    only through one; secret-named ones are masked where the file is written, worthit.secrets.redact), the
    config's hash, and the measurement's own settings in ``extra``."""
    v = study.variant(variant)
    # served with a smaller card's KV pool (serve.emulate_gpu_memory_gib: worthit.plan.emulate): capacity only
    emulated: dict[str, Any] = {"emulated_gpu_memory_gib": v.emulate_gpu_memory_gib} if v.emulate_gpu_memory_gib else {}
    return stamp(
        variant=variant,
        manifest=manifest,
        engine_args=v.engine_args,
        config_hash=config_hash(study.cfg),
        env=dict(v.env),
        **emulated,
        **extra,
    )


# A measurement asked to stop (WORTHIT_STOP_FILE appeared) leaves with this code, having written nothing.
STOP_FILE_ENV = "WORTHIT_STOP_FILE"
STOPPED_EXIT = 75


@contextlib.contextmanager
def stop_on_request(name: str, poll_s: float = 1.0) -> Iterator[None]:
    """Leave the measurement inside as soon as the file that ``WORTHIT_STOP_FILE`` names appears.

    Whoever runs the study within a time budget (``tools/device/run-study.sh``) creates that file when the
    budget ends. The measurement is interrupted as Ctrl-C would (its clients, workers and lm-eval stop), nothing
    is written, and the process exits with :data:`STOPPED_EXIT`: the group ends within seconds, Snakemake
    (with ``--keep-incomplete``) keeps what its other members finished, and the next run measures this one.
    Without the variable nothing is watched."""
    path = os.environ.get(STOP_FILE_ENV)
    if not path:
        yield
        return
    done, asked = threading.Event(), threading.Event()
    # A job of a Snakemake started in the background by a script (`snakemake ... &`, as run-study.sh does)
    # inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the request would be
    # lost. Within this block SIGINT raises KeyboardInterrupt, whatever the process inherited.
    restore = None
    if threading.current_thread() is threading.main_thread():
        inherited = signal.getsignal(signal.SIGINT)
        if inherited in (signal.SIG_IGN, signal.SIG_DFL):
            restore = inherited
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def watch() -> None:
        while not done.wait(poll_s):
            if os.path.exists(path):
                asked.set()
                os.kill(os.getpid(), signal.SIGINT)  # a real signal: it interrupts sleeps and waits too
                return

    threading.Thread(target=watch, name="stop-on-request", daemon=True).start()
    try:
        yield
    except KeyboardInterrupt:
        if not asked.is_set():
            raise
        log.warning("%s: stopped on request (%s exists); nothing written, the next run measures it", name, path)
        raise SystemExit(STOPPED_EXIT) from None
    finally:
        done.set()
        if restore is not None:
            signal.signal(signal.SIGINT, restore)


def consume_in_turn(
    state_path: str,
    name: str,
    index: int,
    startup_timeout_s: float,
    *,
    out: str,
    table: schemas.Table,
    meta: dict[str, Any],
    body: Callable[[ServerState], tuple[list[dict[str, Any]], dict[str, Any]]],
    measured: Collection[int] = (),
    api_key: str | None = None,
) -> None:
    """Wait for the server, take turn ``index`` on it, measure, write; failures are results. The file is
    written before the turn passes on, so a later consumer finds every earlier one's result. Every member
    of a service group measures through here (a variant's consumers, a deployment's validation runs).
    ``measured``: earlier indices whose results exist (see :func:`worthit.server.turn`); ``api_key``: the
    server's key (:func:`check_access` asks with it before measuring)."""
    try:
        with stop_on_request(name), consumer_presence(state_path, name, index):
            state = wait_ready(state_path, startup_timeout_s)
            with turn(state_path, index, name, measured=measured):
                log.info("measuring %s on %s", name, state.url)
                state = wait_ready(state_path, 30)  # it may have died while we waited for our turn
                check_access(state.url, api_key)
                try:
                    rows, extra = body(state)
                except OSError as e:  # the server went away under the measurement (a scrape, a probe)
                    raise failure_during(state_path, state, [f"{type(e).__name__}: {e}"], n=0) from None
                if errs := server_errors(rows):  # the server failed requests (it died?): no evidence
                    raise failure_during(state_path, state, errs, n=len(rows))
                schemas.write(out, table, rows, metadata={**meta, **extra, **stamp(server_url=state.url)})
    except ServerFailed as e:
        log.error("server not available (%s): %s", e.status, e.reason)
        schemas.write_failure(out, table, e.reason, log_tail=e.log_tail, status=e.status, metadata=meta)


def consume(
    study: Study,
    variant: str,
    consumer: str,
    out: str,
    *,
    table: schemas.Table,
    state_path: str,
    meta: dict[str, Any],
    body: Callable[[ServerState], tuple[list[dict[str, Any]], dict[str, Any]]],
) -> None:
    """A variant's measurement, in its place in :meth:`worthit.config.Study.consumers`. Each consumer's
    result is ``<variant folder>/<consumer>.parquet`` (worthit.paths), beside the server's state file."""
    consumers = list(study.consumers(variant))
    index = consumers.index(consumer)
    folder = Path(state_path).parent
    measured = [i for i, c in enumerate(consumers[:index]) if (folder / f"{c}.parquet").exists()]
    timeout = study.cfg["serve"]["startup_timeout_s"]
    consume_in_turn(
        state_path,
        consumer,
        index,
        timeout,
        out=out,
        table=table,
        meta=meta,
        body=body,
        measured=measured,
        api_key=study.api_key,
    )
