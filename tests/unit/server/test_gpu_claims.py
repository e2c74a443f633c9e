"""Pinning servers to GPUs: one lock file per device (worthit.server.supervisor._claim_gpus), and the parse-time
refusal of a variant that needs more GPUs than the run may use. ``nvidia-smi -L`` is answered by a stand-in script
listing two GPUs, so the claim logic runs here as it would on a two-GPU host."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from worthit.config import ConfigError, Study, check_gpu_budget, validate
from worthit.server import ServerFailed
from worthit.server.supervisor import ClaimAbandoned, _claim_gpus

CLAIM = (
    "import json, sys, time\n"
    "from pathlib import Path\n"
    "from worthit.server.supervisor import _claim_gpus\n"
    "ids, held = _claim_gpus(int(sys.argv[1]), Path(sys.argv[2]))\n"
    "print(json.dumps(ids), flush=True)\n"
    "time.sleep(float(sys.argv[3]))\n"
)


@pytest.fixture
def two_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    shim = tmp_path / "shim"
    shim.mkdir()
    smi = shim / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-a)'\necho 'GPU 1: NVIDIA H200 (UUID: GPU-b)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return tmp_path / "locks"


def _claimant(count: int, locks: Path, hold_s: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLAIM, str(count), str(locks), str(hold_s)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )


def test_two_claimants_get_different_devices(two_gpus: Path) -> None:
    a = _claimant(1, two_gpus, 5)
    first = json.loads(a.stdout.readline())
    b = _claimant(1, two_gpus, 0)
    second = json.loads(b.stdout.readline())
    assert {first, second} == {"0", "1"}
    b.wait(10)
    a.kill()
    a.wait(10)


def test_a_third_claimant_waits_until_a_device_is_free(two_gpus: Path) -> None:
    holders = [_claimant(1, two_gpus, 30) for _ in range(2)]
    held = [json.loads(h.stdout.readline()) for h in holders]
    assert sorted(held) == ["0", "1"]
    waiting = _claimant(1, two_gpus, 0)
    time.sleep(1.5)
    assert waiting.poll() is None  # both devices are held
    holders[1].kill()  # a crashed claimant: the kernel drops its lock
    holders[1].wait(10)
    assert json.loads(waiting.stdout.readline()) == held[1]  # the device the crashed claimant held
    assert waiting.wait(15) == 0
    holders[0].kill()
    holders[0].wait(10)


def test_a_crashed_claimants_lock_is_released(two_gpus: Path) -> None:
    a = _claimant(2, two_gpus, 60)
    assert json.loads(a.stdout.readline()) == "0,1"
    os.kill(a.pid, signal.SIGKILL)
    a.wait(10)
    ids, held = _claim_gpus(2, two_gpus)
    assert ids == "0,1" and len(held) == 2
    for fh in held:
        fh.close()


def test_more_gpus_than_the_host_has_is_refused_at_once(two_gpus: Path) -> None:
    with pytest.raises(ServerFailed, match="needs 3 GPU"):
        _claim_gpus(3, two_gpus)


def test_a_scheduler_assigned_device_list_is_left_alone(two_gpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # SLURM or the user pinned it
    assert _claim_gpus(1, two_gpus) == ("1", [])


def _study(gpus: int) -> Study:
    cfg = {
        "study": "g",
        "models": {"m": {"source": "path:/m"}},
        "variants": {"one": {"model": "m", "gpus": 1}, "tp2": {"model": "m", "gpus": gpus}},
    }
    return Study(validate(cfg, "g.yaml"))


def test_a_variant_needing_more_gpus_than_the_run_may_use_is_refused_by_name() -> None:
    check_gpu_budget(_study(2), 2, "g.yaml")
    check_gpu_budget(_study(4), None, "g.yaml")  # no --resources gpu=N: nothing to check against
    with pytest.raises(ConfigError) as e:
        check_gpu_budget(_study(2), 1, "g.yaml")
    msg = str(e.value)
    assert "g.yaml: key 'variants.tp2.gpus'" in msg and "--resources gpu=1" in msg and "at least 2" in msg


def test_snakemake_refuses_the_study_at_parse_time(tmp_path: Path) -> None:
    import yaml

    cfg = {
        "study": "g",
        "models": {"m": {"source": "path:/nonexistent"}},
        "variants": {"tp2": {"model": "m", "gpus": 2}},
    }
    (tmp_path / "g.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(tmp_path),
            "-n",
            "--configfile",
            str(tmp_path / "g.yaml"),
            "--cores",
            "1",
            "--resources",
            "gpu=1",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "key 'variants.tp2.gpus'" in out and "Traceback" not in out, out[-3000:]


def test_a_quantisation_takes_the_whole_host_and_a_server_a_share(tmp_path: Path) -> None:
    """Under the default profile a quantisation (or GGUF conversion) never runs beside a measured server:
    it asks for all of host_load, each server for one unit of it (servers may still run side by side)."""
    import yaml

    profile = yaml.safe_load((ROOT / "profiles" / "default" / "config.yaml").read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n", "--cores", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs: dict[str, set[str]] = {}
    rule = None
    for ln in proc.stdout.splitlines():
        m = re.match(r"\s*(?:local)?rule (\w+):", ln)
        if m:
            rule = m.group(1)
        elif rule and ln.strip().startswith("resources:"):
            share = re.search(r"host_load=\d+", ln)
            jobs.setdefault(rule, set()).add(share.group(0) if share else "none")
            rule = None
    whole = f"host_load={profile['resources']['host_load']}"
    assert jobs["quantize_model"] == {whole} and jobs["fetch_model"] == {whole}
    assert jobs["serve_variant"] == {"host_load=1"}


def test_a_claim_waiting_for_a_device_gives_up_when_told_to_stop(two_gpus: Path) -> None:
    holder = _claimant(2, two_gpus, 30)
    assert json.loads(holder.stdout.readline()) == "0,1"
    asked: list[int] = []

    def give_up() -> str:
        asked.append(1)
        return "it received SIGTERM" if len(asked) >= 3 else ""

    with pytest.raises(ClaimAbandoned, match="while its supervisor waited for 1 free GPU.s., it received SIGTERM"):
        _claim_gpus(1, two_gpus, give_up=give_up, poll_s=0.01)
    assert len(asked) == 3  # asked on every poll, not only at the end of the day-long wait
    holder.kill()
    holder.wait(10)


def test_a_supervisor_waiting_for_a_gpu_has_its_state_file_at_once_and_stops_on_sigterm(
    two_gpus: Path, tmp_path: Path
) -> None:
    """Snakemake removes the service output as the serve job starts and fails the group's consumers unless it
    is back within --latency-wait (5 s): with the GPU still held by the previous variant's stopping server,
    the placeholder must be there before the claim ends. A SIGTERM during that wait ends it with a record."""
    holder = _claimant(2, two_gpus, 60)
    assert json.loads(holder.stdout.readline()) == "0,1"
    state, log = tmp_path / "v" / "server.json", tmp_path / "serve.log"
    spec = {"variant": "v", "model_dir": str(tmp_path), "python": sys.executable, "args": {}, "gpus": 1}
    env = {**os.environ, "WORTHIT_GPU_LOCK_DIR": str(two_gpus), "PYTHONPATH": str(ROOT / "src")}
    sup = subprocess.Popen(
        [sys.executable, "-m", "worthit.server", "--state", str(state), "--log", str(log), "--spec", json.dumps(spec)],
        env=env,
    )
    try:
        deadline = time.monotonic() + 4
        while not state.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert state.read_text() == "{}"  # the placeholder consumers wait on, while the GPUs are held
        time.sleep(1.0)
        assert sup.poll() is None and state.read_text() == "{}"  # still waiting for a GPU: no server started
        sup.send_signal(signal.SIGTERM)
        assert sup.wait(10) == 0
    finally:
        sup.kill()
        holder.kill()
        holder.wait(10)
    record = json.loads(Path(str(state) + ".exit").read_text())
    assert record["status"] == "failed"
    assert "was not started: while its supervisor waited for 1 free GPU(s), it received SIGTERM" in record["reason"]
    assert "was not started" in log.read_text()
