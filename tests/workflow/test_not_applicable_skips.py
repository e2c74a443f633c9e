"""What the plan rules not applicable on this CPU costs nothing: on a CPU without AVX-512 (the study config's
hardware.cpu_avx512_or_amx: false, as /proc/cpuinfo would say there) the AWQ INT4 variant's quantisation is no
job of the DAG (snakemake -n), while its measurements still record why it is not applicable and what hardware
would serve it; on a CPU with AVX-512 the quantisation is planned as before."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml

from tests.conftest import ROOT, require_env, run_snakemake
from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE


def jobs(out: str) -> dict[str, int]:
    """The dry run's job counts per rule (Snakemake's 'Job stats' table)."""
    return {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, re.MULTILINE)}


def dry_run(tmp_path, cfg: dict) -> str:
    tmp_path.mkdir(parents=True)
    cfgfile = tmp_path / "study.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path / "work")]
    proc = subprocess.run([*cmd, "--configfile", str(cfgfile), "-n", "--cores", "1"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_the_default_study_quantises_nothing_a_cpu_without_avx512_cannot_serve(tmp_path):
    require_env("serve")  # the CPU build of vLLM serves the study: the plan's CPU rules are this host's
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    int4 = [v for v, spec in cfg["variants"].items() if "quantize" in cfg["models"][spec["model"]]]
    assert int4, "the embedded default quantises a model for one of its variants"
    without = jobs(dry_run(tmp_path / "avx2", {**cfg, "hardware": {"cpu_avx512_or_amx": False}}))
    assert "quantize_model" not in without and without["record_model_not_made"] == 1
    # the variant is still measured everywhere its config says: each measurement records the refusal
    assert without["serve_variant"] == len(cfg["variants"]) and without["measure_kv"] >= len(cfg["variants"]) - 1
    with_avx512 = jobs(dry_run(tmp_path / "avx512", {**cfg, "hardware": {"cpu_avx512_or_amx": True}}))
    assert with_avx512["quantize_model"] == 1 and "record_model_not_made" not in with_avx512
    assert with_avx512["total"] == without["total"]  # one job for the model either way


def test_a_not_applicable_variant_records_why_without_its_model_being_made(tmp_path):
    require_env("serve")
    cfg = {
        "study": "skip",
        "models": {
            "qwen05b": {"source": "hf:Qwen/Qwen2.5-0.5B-Instruct"},  # never fetched: nothing here serves it
            "qwen05b-awq": {"quantize": {"base": "qwen05b", "scheme": "W4A16_ASYM", "group_size": 64}},
        },
        "serve": {"engine_args": {"dtype": "float32"}, "startup_timeout_s": 60},
        "variants": {"base": {"model": "qwen05b"}, "awq_int4": {"model": "qwen05b-awq", "experiments": ["kv"]}},
        "hardware": {"cpu_avx512_or_amx": False},
    }
    work = tmp_path / "work"
    proc = run_snakemake(work, cfg, "results/skip/variant~awq_int4/kv.parquet", timeout=300)
    out = proc.stdout + proc.stderr
    assert "quantize_model" not in out and "fetch_model" not in out  # neither the model nor its base is made
    assert not (work / "resources" / "models" / "qwen05b-awq").exists()
    kv = schemas.read(work / "results/skip/variant~awq_int4/kv.parquet", KV_CACHE)
    assert kv.status == "not_applicable"
    assert "no AVX-512" in kv.reason and "x86 CPU with AVX-512 or a CUDA GPU" in kv.reason
    assert "model 'qwen05b-awq' was not quantised" in kv.reason
    assert "not applicable: this CPU has no AVX-512" in (work / "results/skip/logs/serve/awq_int4.log").read_text()
