"""The hardware gate where the server starts: a refused variant never starts, and every consumer records
``not_applicable`` with the reason (no vLLM needed: the server is never launched)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from tests.conftest import ROOT, study_config
from worthit import schemas
from worthit.config import Study, validate
from worthit.experiments.kv.measure import measure_kv
from worthit.experiments.kv.tables import KV_CACHE

SUPERVISE = """
import sys, json
from pathlib import Path
from worthit.gating import Gpu
from worthit.server import supervise
a = json.loads(sys.argv[1])
sys.exit(supervise(Path(a["state"]), Path(a["log"]), variant="fp8", model_dir=a["model_dir"],
                   python="/nonexistent/python", args={"kv-cache-dtype": "fp8"}, extra=[], env={},
                   devices=[Gpu("0", "NVIDIA GeForce RTX 3090", "8.6")]))
"""


def test_fp8_kv_on_sm86_is_recorded_not_applicable_without_starting_a_server(tmp_path, model_dir):
    state, log = tmp_path / "server.json", tmp_path / "serve.log"
    args = json.dumps({"state": str(state), "log": str(log), "model_dir": str(model_dir)})
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISE, args], cwd=ROOT)
    try:
        cfg = validate(
            study_config(
                model_dir,
                variants={"fp8": {"model": "smol", "engine_args": {"kv-cache-dtype": "fp8"}, "experiments": ["kv"]}},
            )
        )
        out = tmp_path / "kv.parquet"
        t0 = time.monotonic()
        measure_kv(Study(cfg), "fp8", str(state), str(model_dir.parent / "manifest.json"), out=str(out))
        assert time.monotonic() - t0 < 30
        res = schemas.read(out, KV_CACHE)
        assert res.status == schemas.STATUS_NOT_APPLICABLE
        assert res.reason.startswith("not applicable: NVIDIA GeForce RTX 3090 is sm_86")
        assert "not starting the server" in log.read_text()
        assert proc.poll() is None  # the supervisor waits for its group to end, like a failed server's
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
