"""What a server that died mid-run leaves: the requests' errors that are the server's own, and the log's line
that says why (the real kill is tests/integration/test_server_death.py)."""

from __future__ import annotations

from worthit.server import death_line, server_errors

LOG = """[worthit] 2026-12-03 12:00:00 starting: python -m vllm.entrypoints.openai.api_server --port 1
(APIServer pid=1) INFO 12-03 12:00:30 [launcher.py:46] Application startup complete.
(APIServer pid=1) WARNING 12-03 12:01:00 [core_client.py:818] [shutdown] MPClient: engine core exited \
unexpectedly; starting cleanup
(APIServer pid=1) ERROR 12-03 12:01:00 [serving.py:1] vllm.v1.engine.exceptions.EngineDeadError: EngineCore \
encountered an issue.
/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: leaked shared_memory
KeyError: '/psm_1234'
"""


def test_the_death_line_is_vllms_own_not_the_shutdown_noise() -> None:
    assert death_line(LOG) == "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup"
    assert death_line(LOG.replace("engine core exited unexpectedly", "stopping")).startswith(
        "vllm.v1.engine.exceptions.EngineDeadError"
    )
    # only the last start counts; a start that never served names no death
    assert death_line(LOG + "[worthit] 2026-12-03 12:02:00 starting: python -m vllm\n") is None


def test_the_servers_own_errors_are_told_from_the_clients() -> None:
    rows = [
        {"error": None},
        {"error": "HTTP 500: EngineCore encountered an issue"},
        {"error": "server error in stream: {...}"},
        {"error": "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 1)"},
        {"error": "ConnectionError: connection lost mid-response (closed by peer)"},
        {"error": "timeout after 30s"},
        {"error": "expected 8 output tokens, got 7"},
        {"error": "HTTP 400: bad request"},
    ]
    assert len(server_errors(rows)) == 4
