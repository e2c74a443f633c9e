"""The plan learns the kernels (worthit.plan.kernels): a W4A16 step predicted from each kernel family's
efficiency, calibrated on measured MBU, within 20 % of what examples/h200-qwen/7b-int4 measured on one H200."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import ROOT
from worthit import plan as P
from worthit.config import load
from worthit.plan import kernels

SAMPLE = ROOT / "examples" / "h200-qwen" / "7b-int4"
STUDY = ROOT / "config" / "studies" / "h200-qwen2.5-7b-int4.yaml"
H200 = P.Hardware.named("NVIDIA H200")
MODELS = ROOT / "tests" / "fixtures" / "models"


def measured() -> dict[str, dict[str, str]]:
    """The sample's committed capacity table: TPOT P50 at the lowest level and weight bytes per variant."""
    with open(SAMPLE / "results" / "report" / "capacity.csv", newline="") as f:
        return {r["variant"]: r for r in csv.DictReader(f)}


def sample_plan() -> dict[str, dict]:
    given = {
        "qwen7b-random": str(SAMPLE / "plan" / "config.json"),
        "qwen7b-random-int4": str(SAMPLE / "plan" / "config-int4.json"),
    }
    plan = P.make_plan(load(STUDY), H200, ROOT / "no-such-dir", given=given, hub=False)
    return {r["variant"]: r for r in plan.rows}


def test_the_calibration_table_holds_the_sample_s_measurements():
    m = measured()
    rows = {r.family: r for r in kernels.table() if r.gpu == "NVIDIA H200"}
    for family, variant in ((kernels.MACHETE, "int4_machete"), (kernels.MARLIN, "int4_marlin")):
        r = rows[family]
        assert r.w4a16_tpot_ms == pytest.approx(float(m[variant]["tpot_ms_p50"]))
        assert r.bf16_tpot_ms == pytest.approx(float(m["bf16"]["tpot_ms_p50"]))
        assert (r.w4a16_weight_bytes, r.bf16_weight_bytes) == (
            int(m[variant]["weight_bytes"]),
            int(m["bf16"]["weight_bytes"]),
        )
        # the efficiency is the kernel's MBU over bf16's, as the report measured them
        mbu = float(m[variant]["mbu_pct"]) / float(m["bf16"]["mbu_pct"])
        assert r.efficiency == pytest.approx(mbu, rel=0.02)


def test_the_plan_predicts_the_int4_step_within_20_percent_of_the_measurement():
    rows, m = sample_plan(), measured()
    for variant, family in (("int4_machete", kernels.MACHETE), ("int4_marlin", kernels.MARLIN)):
        row = rows[variant]
        assert row["kernel"] == family
        assert row["tpot_expected_ms_c1"] == pytest.approx(float(m[variant]["tpot_ms_p50"]), rel=0.20), variant
        assert f"W4A16 ({family}): {row['tpot_expected_ms_c1']:.2f} ms/step" in row["notes"]
        assert "kernel efficiency 0." in row["notes"] and "capacity.csv" in row["notes"]
        # weight bytes alone said about half the measured step
        assert row["tpot_floor_ms_c1"] / row["bandwidth_fraction"] < 0.55 * float(m[variant]["tpot_ms_p50"])
    assert rows["bf16"].get("kernel") is None and rows["bf16"].get("kernel_efficiency") is None
    assert rows["bf16"]["tpot_expected_ms_c1"] == pytest.approx(float(m["bf16"]["tpot_ms_p50"]), rel=0.20)


def test_the_family_follows_the_checkpoint_the_flag_and_the_gpu():
    awq = P.ModelShape.from_file(MODELS / "qwen2.5-7b-instruct-awq" / "config.json")
    bf16 = P.ModelShape.from_file(MODELS / "qwen2.5-7b-instruct" / "config.json")
    ct = P.Quant("compressed-tensors", 4, 128, zero_point=True)
    from dataclasses import replace

    h100, rtx = P.Hardware.named("H100"), P.Hardware.named("RTX 3090")
    assert kernels.family(P.Subject("v", {}, replace(bf16, quant=ct)), h100) == kernels.MACHETE
    assert kernels.family(P.Subject("v", {"linear-backend": "marlin"}, replace(bf16, quant=ct)), h100) == kernels.MARLIN
    assert kernels.family(P.Subject("v", {}, awq), h100) == kernels.MARLIN  # AWQ format: awq_marlin
    assert kernels.family(P.Subject("v", {}, replace(bf16, quant=ct)), rtx) == kernels.MARLIN  # no Machete below sm_90
    assert kernels.family(P.Subject("v", {}, bf16), h100) is None
    assert kernels.family(P.Subject("v", {}, awq), P.Hardware.host_cpu(True)) == kernels.CPU
    assert kernels.calibration(kernels.CPU, P.Hardware.host_cpu(True)) is None
    # an H100 takes the H200's rows (nearest bandwidth), the 3090 its own: Marlin near bf16's fraction there
    assert kernels.calibration(kernels.MACHETE, h100).gpu == "NVIDIA H200"  # type: ignore[union-attr]
    assert kernels.calibration(kernels.MARLIN, rtx).efficiency == 1.0  # type: ignore[union-attr]
