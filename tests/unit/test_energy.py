"""Energy per output token (worthit.energy): NVML's counters read before and after a level, summed over the
server's GPUs; every way the counter cannot be read gives a reason, never a zero."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from tests.conftest import ROOT
from worthit import energy
from worthit.aggregate import level_energy as summary_energy
from worthit.aggregate import summary_rows
from worthit.experiments.loadtest.measure import level_energy
from worthit.metrics import Slo


def counters(*readings: Sequence[int]) -> energy.Reader:
    """A reader returning the given per-GPU counters (mJ), one reading per call."""
    it: Iterator[Sequence[int]] = iter(readings)
    return lambda: next(it)


def clock(*times: float) -> object:
    it = iter(times)
    return lambda: next(it)


def test_joules_are_summed_over_the_server_s_gpus_between_the_readings():
    reader = counters([1_000_000, 2_000_000], [1_350_000, 2_450_500])
    before = energy.read(reader, clock(10.0))  # type: ignore[arg-type]
    after = energy.read(reader, clock(12.5))  # type: ignore[arg-type]
    out = energy.between(before, after)
    assert out == {"energy_j": 800.5, "energy_s": 2.5, "energy_gpus": 2, "energy_reason": None}
    assert energy.per_output_token(out["energy_j"], 1601) == pytest.approx(0.5)


def test_a_counter_that_goes_backwards_is_not_measured_and_says_which_gpu():
    reader = counters([5_000, 9_000], [6_000, 100])  # GPU 1 reset (or wrapped) during the level
    out = energy.between(energy.read(reader), energy.read(reader))
    assert out["energy_j"] is None and out["energy_s"] is None
    assert "GPU 1 went backwards" in out["energy_reason"]


def test_an_unsupported_counter_or_no_gpu_is_not_measured_with_its_reason():
    def unsupported() -> list[int]:
        raise energy.Unavailable("not measured: the GPU does not report total energy (NVML: not supported)")

    out = energy.between(energy.read(unsupported), energy.read(unsupported))
    assert out["energy_j"] is None and "not supported" in out["energy_reason"]
    assert energy.between(energy.read(None), energy.read(None))["energy_reason"] == energy.NO_NVML
    assert energy.read(lambda: []).reason == energy.NO_NVML
    assert energy.per_output_token(None, 100) is None and energy.per_output_token(10.0, 0) is None


def test_a_gpu_count_that_changes_is_not_measured():
    reader = counters([1], [2, 3])
    assert (
        "1 GPUs read before the level, 2 after"
        in energy.between(energy.read(reader), energy.read(reader))["energy_reason"]
    )


def test_nvml_on_this_machine_reads_or_says_why_not():
    """On a CPU host (no nvidia-ml-py, or no driver) the reason names NVML; on a GPU host it reads counters."""
    reader, why = energy.reader_for(None)
    if reader is None:
        assert why is not None and why.startswith(energy.NO_NVML)
    else:
        values = reader()
        assert values and all(v >= 0 for v in values)


def test_a_level_s_record_divides_by_the_measured_requests_output_tokens():
    reader = counters([0], [25_600])
    before, after = energy.read(reader), energy.read(reader)
    rows = [{"output_tokens": 256}] * 4 + [{"output_tokens": 0}]  # one failed request: no tokens
    rec = level_energy([before], after, rows, None)
    assert rec["energy_j"] == pytest.approx(25.6)
    assert rec["energy_j_per_output_token"] == pytest.approx(0.025)
    cpu = level_energy([energy.read(None)], energy.read(None), rows, energy.NO_NVML + ": nvidia-ml-py is not installed")
    assert cpu["energy_j_per_output_token"] is None and cpu["energy_reason"].startswith(energy.NO_NVML)
    never = level_energy([], after, rows, None)  # the loop ended before its measured requests
    assert never["energy_j"] is None and "no measured request" in never["energy_reason"]


def test_the_summary_carries_each_level_s_energy_and_says_when_none_was_recorded():
    rec = {"energy_j": 12.0, "energy_s": 3.0, "energy_gpus": 1, "energy_j_per_output_token": 0.1, "energy_reason": None}
    assert summary_energy({"energy": rec}) == rec
    assert summary_energy({}) == {**dict.fromkeys(rec), "energy_reason": energy.NOT_RECORDED}
    # a level measured before energy was read: null, with the reason
    level = ROOT / "tests" / "fixtures" / "embedded-default" / "variant~baseline" / "load" / "conc~1.parquet"
    (row,) = summary_rows({}, {"baseline": [str(level)]}, Slo())
    assert row["n"] and row["energy_j_per_output_token"] is None and row["energy_reason"] == energy.NOT_RECORDED
