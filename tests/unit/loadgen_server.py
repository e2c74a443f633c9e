"""The calibration server as a pytest fixture, for the load-generator tests."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator

import pytest

TTFT_MS, ITL_MS = 20.0, 2.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_calibration_server(*args: str) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A calibration server (TTFT_MS, ITL_MS, then ``args``) on a free port: its URL and process."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worthit.testing.calibration",
            "--port",
            str(port),
            "--ttft-ms",
            str(TTFT_MS),
            "--itl-ms",
            str(ITL_MS),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            try:
                urllib.request.urlopen(url + "/health", timeout=1)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "server died") from None
                time.sleep(0.05)
        yield url, proc
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module", name="server")
def calibration_server() -> Iterator[str]:
    """URL of a calibration server (TTFT_MS, ITL_MS) running for the test module."""
    with running_calibration_server() as (url, _):
        yield url
