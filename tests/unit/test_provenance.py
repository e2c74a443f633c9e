"""Which machine measured a result (worthit.provenance): the host, and the GPUs' UUIDs that nvidia-smi
reports (answered here by a stand-in script printing what an H200 pair prints)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from worthit import provenance


def test_the_hardware_stamp_records_every_gpus_uuid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        "echo 'NVIDIA H200, 580.159.04, 9.0, 143771 MiB, GPU-1a2b3c4d-0000-1111-2222-333344445555'\n"
        "echo 'NVIDIA H200, 580.159.04, 9.0, 143771 MiB, GPU-9f8e7d6c-0000-1111-2222-333344445555'\n"
    )
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    provenance.hardware.cache_clear()  # one stamp per process: this one with the stand-in
    try:
        hw = provenance.hardware()
    finally:
        provenance.hardware.cache_clear()
    assert hw["gpu"] == "NVIDIA H200" and hw["gpu_count"] == 2 and hw["compute_capability"] == "9.0"
    assert hw["gpu_uuids"] == [
        "GPU-1a2b3c4d-0000-1111-2222-333344445555",
        "GPU-9f8e7d6c-0000-1111-2222-333344445555",
    ]
    assert provenance.machine(hw) == f"{hw['host']} (GPU 1a2b3c4d, 9f8e7d6c)"


def test_a_stamp_without_uuids_names_the_host_and_no_stamp_names_nothing() -> None:
    assert provenance.machine({"host": "node7", "gpu": "NVIDIA H200"}) == "node7"
    assert provenance.machine(None) is None and provenance.machine({}) is None
