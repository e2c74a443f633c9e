"""tools/device/targets.py reads a variant's measurement files off Snakemake's own plan of the real-weights
H200 study (no run): what one device call must make to finish the variants it is given.

Run (Snakemake; one at a time on a shared machine):
    flock /tmp/worthit-heavy.lock python -m pytest tests/workflow/test_device_targets.py
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

CONFIG = "config/studies/h200-qwen2.5-coder.yaml"
RESULTS = "results/h200-qwen2.5-coder"


def targets(*args: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "tools/device/targets.py", CONFIG, *args], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()


def test_a_variants_targets_are_its_measurements_and_nothing_else():
    bf16 = targets("bf16")
    base = f"{RESULTS}/variant~bf16/"
    assert all(t.startswith(base) for t in bf16)
    names = {t[len(base) :] for t in bf16}
    loads = {n for n in names if n.startswith("load/conc~")}
    assert len(loads) == 4 * 3  # 4 levels x 3 repeats
    assert {"load/conc~1.parquet", "load/conc~256.rep~3.parquet"} <= loads
    # the shared-prefix workload level, on bf16 and no_prefix_cache only: 2 concurrencies x 3 repeats
    shared = {n for n in names if n.startswith("load/shared_prefix/")}
    assert len(shared) == 2 * 3 and "load/shared_prefix/conc~16.rep~3.parquet" in shared
    assert not any("shared_prefix" in t for t in targets("fp8_kv"))
    assert {"kv.parquet", "accuracy.parquet", "specdec/verify.parquet", "prefix/len~4000.parquet"} <= names
    assert not {"server.json", "serve_spec.json"} & names
    # the draft served alone only runs its load levels; the variants' targets add up
    assert {t.rsplit("/", 1)[0] for t in targets("draft_alone")} == {f"{RESULTS}/variant~draft_alone/load"}
    assert len(targets("bf16", "draft_alone")) == len(bf16) + 12


def test_the_quantised_model_is_a_target_only_for_the_variants_serving_it():
    assert targets("--quantized", "awq_int4", "fp8_kv") == ["resources/models/qwen-coder-1.5b-awq/manifest.json"]
    assert targets("--quantized", "bf16") == []


def test_an_unknown_variant_is_refused_with_the_allowed_names():
    proc = subprocess.run(
        [sys.executable, "tools/device/targets.py", CONFIG, "nope"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2 and "'nope'" in proc.stderr and "spec_draft" in proc.stderr
