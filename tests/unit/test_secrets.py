"""Secrets: the key's source, its refusal in the config, the redaction at every write, and clients that
authenticate (against the calibration server guarding /v1 as vLLM does with VLLM_API_KEY)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.loadgen_server import running_calibration_server
from tests.unit.word_tokenizer import word_level_tokenizer
from worthit import schemas, secrets
from worthit.config import ROOT, ConfigError, Study, validate
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.measure import measure_level
from worthit.loadgen.client import ClientConfig, Refused, RequestSpec, closed_loop, run, sessions_loop
from worthit.models import Manifest
from worthit.server import ServerFailed, argv_command, engine_flags, http_get
from worthit.stages import check_access, result_meta

KEY = "sk-sentinel-0123456789"


def study_cfg() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))


# ------------------------------------------------------------------------------------------ the config
@pytest.mark.parametrize(
    "where",
    [
        ("serve", "engine_args", "api-key"),
        ("serve", "engine_args", "--api_key"),
        ("variants", "baseline", "engine_args", "api-key"),
    ],
)
def test_an_api_key_in_the_config_is_refused_with_where_it_goes(where: tuple[str, ...]) -> None:
    cfg = study_cfg()
    node = cfg
    for k in where[:-1]:
        node = node.setdefault(k, {})
    node[where[-1]] = KEY
    with pytest.raises(ConfigError) as e:
        validate(cfg, "study.yaml")
    msg = str(e.value)
    assert "study.yaml" in msg and f"{'.'.join(where)}" in msg
    assert "serve.api_key_env" in msg and "VLLM_API_KEY" in msg and "serve.api_key_file" in msg
    assert KEY not in msg


def test_api_key_in_extra_args_and_secret_env_values_are_refused() -> None:
    cfg = study_cfg()
    v = next(iter(cfg["variants"]))
    cfg["variants"][v]["extra_args"] = ["--api-key", KEY]
    with pytest.raises(ConfigError, match=r"extra_args\[0\]"):
        validate(cfg, "s.yaml")
    cfg = study_cfg()
    cfg["serve"]["env"] = {"HF_TOKEN": KEY}
    with pytest.raises(ConfigError, match=r"serve\.env\.HF_TOKEN.*environment you run the study in"):
        validate(cfg, "s.yaml")
    cfg = study_cfg()
    cfg["serve"]["env"] = {"HF_ENDPOINT": "https://me:pw@mirror.example/"}
    with pytest.raises(ConfigError, match="credentials"):
        validate(cfg, "s.yaml")


def test_harmless_names_and_values_are_accepted() -> None:
    cfg = study_cfg()
    cfg["serve"]["env"] = {**cfg["serve"].get("env", {}), "TOKENIZERS_PARALLELISM": "false"}
    cfg["serve"]["engine_args"] = {**cfg["serve"].get("engine_args", {}), "max-num-batched-tokens": 512}
    out = validate(cfg, "s.yaml")
    assert out["serve"]["api_key_env"] == "VLLM_API_KEY" and out["serve"]["api_key_file"] is None
    assert Study(out).api_key_source is None  # the default: the serve spec stays as it was


def test_the_key_comes_from_the_named_variable_or_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_API_KEY", raising=False)
    assert secrets.read_key(None) is None
    monkeypatch.setenv("VLLM_API_KEY", KEY)
    assert secrets.read_key(None) == KEY
    monkeypatch.setenv("MY_KEY", "other-key-value")
    assert secrets.read_key({"env": "MY_KEY"}) == "other-key-value"
    f = tmp_path / "key"
    f.write_text(KEY + "\n")
    assert secrets.read_key({"env": "MY_KEY", "file": str(f)}) == KEY
    with pytest.raises(secrets.SecretError, match=r"serve\.api_key_file"):
        secrets.read_key({"file": str(tmp_path / "missing")})
    cfg = validate({**study_cfg(), "serve": {**study_cfg()["serve"], "api_key_file": str(f)}}, "s.yaml")
    assert Study(cfg).api_key == KEY and Study(cfg).api_key_source == {"env": "VLLM_API_KEY", "file": str(f)}


def test_the_server_gets_the_key_in_its_environment_only() -> None:
    env = secrets.server_env({"VLLM_API_KEY": "stale", "PATH": "/bin"}, KEY)
    assert env == {"VLLM_API_KEY": KEY, "PATH": "/bin"}
    assert "VLLM_API_KEY" not in secrets.server_env({"VLLM_API_KEY": "stale"}, None)
    # a printed deployment's --api-key "$VLLM_API_KEY" is dropped: the key goes through the environment
    cmd, _ = argv_command(sys.executable, ["vllm", "serve", "m", "--api-key", "$VLLM_API_KEY", "--api-key=x"], 8000)
    assert "--api-key" not in " ".join(cmd)
    assert "--api-key" not in engine_flags({"max-num-seqs": 4})


# ------------------------------------------------------------------------------------------ redaction
def test_redaction_masks_every_kind_of_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_sentinel_token_42")
    monkeypatch.setenv("DB_PASSWORD", "pw-sentinel-43")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    data = {
        "engine_args": {"api-key": KEY, "max-num-batched-tokens": 512},
        "env": {"MY_SECRET": "s3cr3t-value", "VLLM_CACHE_ROOT": "/tmp/c", "TOKENIZERS_PARALLELISM": "false"},
        "argv": ["vllm", "serve", "m", "--api-key", KEY],
        "log": "args: hf_sentinel_token_42 and pw-sentinel-43; https://user:pass@host/x; --api-key=abcdefgh",
        "headers": {"Authorization": f"Bearer {KEY}"},
        "n": 3,
    }
    out = secrets.redact(data)
    text = json.dumps(out)
    for s in (KEY, "s3cr3t-value", "hf_sentinel_token_42", "pw-sentinel-43", "user:pass", "abcdefgh"):
        assert s not in text
    assert out["engine_args"]["max-num-batched-tokens"] == 512 and out["n"] == 3
    assert out["env"]["VLLM_CACHE_ROOT"] == "/tmp/c" and out["env"]["TOKENIZERS_PARALLELISM"] == "false"
    assert out["argv"][-1] == "***" and "https://***@host/x" in out["log"]
    assert data["engine_args"]["api-key"] == KEY  # a copy: the input is left as it was


def test_printed_commands_show_the_variable_not_the_key() -> None:
    cmd = ["vllm", "serve", "org/m", "--max-num-seqs", "8", "--api-key", KEY]
    assert secrets.printable_argv(cmd)[-1] == "$VLLM_API_KEY"
    line = secrets.shell_command(cmd)
    assert line.endswith('--api-key "$VLLM_API_KEY"') and KEY not in line


def test_parquet_metadata_and_logs_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_sentinel_token_44")
    out = tmp_path / "kv.parquet"
    schemas.write_failure(
        out,
        KV_CACHE,
        "failed with hf_sentinel_token_44",
        log_tail=f"--api-key {KEY}",
        metadata={"engine_args": {"api_key": KEY}, "url": "http://u:p@127.0.0.1:1"},
    )
    raw = out.read_bytes()
    assert b"hf_sentinel_token_44" not in raw and KEY.encode() not in raw and b"u:p@" not in raw
    assert schemas.read(out, KV_CACHE).metadata["engine_args"] == {"api_key": "***"}
    log_file = tmp_path / "stage.log"
    handler = logging.FileHandler(log_file)
    handler.setFormatter(secrets.RedactingFormatter("%(message)s"))
    lg = logging.getLogger("test-secrets")
    lg.addHandler(handler)
    lg.warning("token is %s", "hf_sentinel_token_44")
    handler.close()
    assert "hf_sentinel_token_44" not in log_file.read_text() and "***" in log_file.read_text()


def test_a_variants_environment_is_in_its_results_provenance_with_secrets_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every measurement records the server's environment variables (serve.env, then variants.<v>.env: vLLM
    selects some things only through one) beside its engine arguments; a secret-named one (refused in a
    config, here put in by hand) is masked where the file is written."""
    cfg = copy.deepcopy(study_cfg())
    cfg["serve"] = {**(cfg.get("serve") or {}), "env": {"VLLM_CACHE_ROOT": "/tmp/c", "VLLM_X": "serve"}}
    cfg["variants"]["baseline"]["env"] = {"VLLM_X": "variant", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    study = Study(validate(cfg))
    manifest = Manifest(name="m", source="path:/m", revision=None, model_dir="/m")
    meta = result_meta(study, "baseline", manifest)
    assert meta["env"] == {"VLLM_CACHE_ROOT": "/tmp/c", "VLLM_X": "variant", "VLLM_USE_FLASHINFER_SAMPLER": "0"}
    assert result_meta(study, "no_prefix_cache", manifest)["env"] == {"VLLM_CACHE_ROOT": "/tmp/c", "VLLM_X": "serve"}
    monkeypatch.setenv("HF_TOKEN", "hf_sentinel_token_45")
    out = tmp_path / "kv.parquet"
    schemas.write_failure(
        out, KV_CACHE, "x", metadata={**meta, "env": {**meta["env"], "HF_TOKEN": "hf_sentinel_token_45"}}
    )
    assert b"hf_sentinel_token_45" not in out.read_bytes()
    assert schemas.read(out, KV_CACHE).metadata["env"] == {**meta["env"], "HF_TOKEN": "***"}


# ------------------------------------------------------------------------------------------ clients
@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Any:
    mp = pytest.MonkeyPatch()
    mp.setenv("VLLM_API_KEY", KEY)
    with running_calibration_server() as (url, _):
        mp.undo()  # the server has read it; the clients below get the key only as they are given it
        yield url


def specs(n: int) -> list[RequestSpec]:
    return [RequestSpec("hello", 1, 4) for _ in range(n)]


@pytest.mark.parametrize("fast", [True, False], ids=["protocol", "aiohttp"])
def test_every_transport_and_schedule_sends_the_key(guarded: str, fast: bool) -> None:
    cfg = ClientConfig(base_url=guarded, model="calibration", api_key=KEY, fast=fast)
    closed = asyncio.run(closed_loop(cfg, specs(4), 2))
    sessions = asyncio.run(sessions_loop(cfg, [specs(2), specs(2)], concurrency=2))
    opened = asyncio.run(sessions_loop(cfg, [specs(1), specs(1)], arrivals_s=[0.0, 0.01]))
    assert all(r.success for res in (closed, sessions, opened) for r in res.records)


def test_worker_processes_send_the_key(guarded: str) -> None:
    cfg = ClientConfig(base_url=guarded, model="calibration", api_key=KEY)
    assert all(r.success for r in run(cfg, specs(4), 2, processes=2).records)


@pytest.mark.parametrize("fast", [True, False], ids=["protocol", "aiohttp"])
def test_a_refused_request_ends_the_level_at_once(guarded: str, fast: bool) -> None:
    cfg = ClientConfig(base_url=guarded, model="calibration", fast=fast)
    with pytest.raises(Refused) as e:
        asyncio.run(closed_loop(cfg, specs(50), 2))
    assert e.value.status == 401 and "Unauthorized" in e.value.detail


def test_scrapes_and_the_access_check_send_the_key(guarded: str) -> None:
    assert http_get(guarded + "/v1/models", api_key=KEY)[0] == 200
    assert http_get(guarded + "/v1/models")[0] == 401
    check_access(guarded, KEY)
    with pytest.raises(ServerFailed) as e:
        check_access(guarded, None)
    assert "requires an API key" in e.value.reason and "serve.api_key_env" in e.value.reason


def test_a_level_without_the_key_fails_naming_the_cause_and_the_fix(guarded: str, tmp_path: Path) -> None:
    tokenizer = tmp_path / "tokenizer"
    word_level_tokenizer().save_pretrained(tokenizer)
    with pytest.raises(ServerFailed) as e:
        measure_level(
            guarded,
            "calibration",
            str(tokenizer),
            _conc(2),
            workload=None,
            num_requests=8,
            prompt_tokens=4,
            output_tokens=4,
            warmup=0,
            progress=False,
        )
    assert "requires an API key" in e.value.reason and "HTTP 401" in e.value.reason
    ok = measure_level(
        guarded,
        "calibration",
        str(tokenizer),
        _conc(2),
        workload=None,
        num_requests=4,
        prompt_tokens=4,
        output_tokens=4,
        warmup=0,
        progress=False,
        api_key=KEY,
    )
    assert len(ok.rows) == 4 and all(r["success"] for r in ok.rows)


def _conc(c: int) -> Any:
    from worthit.loadgen.levels import CONC, LoadLevel

    return LoadLevel(CONC, c)


def test_worthit_loadtest_reads_openai_api_key_or_the_named_variable(guarded: str) -> None:
    import os

    def cli(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
        argv = ["-m", "worthit.cli", "loadtest", "--url", guarded, "--model", "calibration", "--num-requests", "2"]
        base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VLLM_API_KEY")}
        return subprocess.run(
            [sys.executable, *argv, *extra], env={**base, **env}, capture_output=True, text=True, timeout=120
        )

    assert cli({"OPENAI_API_KEY": KEY}).returncode == 0
    named = cli({"GATEWAY_KEY": KEY}, "--api-key-env", "GATEWAY_KEY")
    assert named.returncode == 0, named.stderr
    refused = cli({})
    assert refused.returncode == 1
    assert "requires an API key" in refused.stderr and "OPENAI_API_KEY" in refused.stderr
    assert KEY not in refused.stderr + refused.stdout
    bad = cli({}, "--header", "no-colon")
    assert bad.returncode == 2 and "NAME:VALUE" in bad.stderr
    with_header = cli({}, "--header", f"Authorization: Bearer {KEY}")
    assert with_header.returncode == 0, with_header.stderr


def test_the_config_dump_is_redacted() -> None:
    cfg = copy.deepcopy(study_cfg())
    cfg["serve"]["env"] = {"SOME_TOKEN": "value-that-is-secret"}
    assert "value-that-is-secret" not in yaml.safe_dump(secrets.redact(cfg))


# ------------------------------------------------------------------------------------------ the supervisor
def test_the_supervisor_starts_vllm_on_loopback_with_an_argument_list_and_the_key_in_its_environment(
    tmp_path: Path,
) -> None:
    """The real supervisor with a stand-in "vLLM" that records its argv and environment and prints the key
    (as a server that logs its settings would): loopback only, no shell between the config and vLLM, the key
    from the file as VLLM_API_KEY, and the log masked."""
    record = tmp_path / "argv.json"
    fake = tmp_path / "python"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time\n"
        "seen = {'argv': sys.argv[1:], 'key': os.environ.get('VLLM_API_KEY')}\n"
        f"open({str(record)!r}, 'w').write(json.dumps(seen))\n"
        "print('settings: api_key=' + str(os.environ.get('VLLM_API_KEY')), flush=True)\n"
        "time.sleep(300)\n"
    )
    fake.chmod(0o755)
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    hostile = "$(touch PWNED); `touch PWNED2` && echo"
    spec = {
        "variant": "v",
        "model_dir": str(tmp_path),
        "python": str(fake),
        "args": {"chat-template": hostile},
        "gpus": 0,
        "api_key": {"env": "VLLM_API_KEY", "file": str(key_file)},
    }
    state, log = tmp_path / "server.json", tmp_path / "serve.log"
    state.write_text("{}")
    sup = subprocess.Popen(
        [sys.executable, "-m", "worthit.server", "--state", str(state), "--log", str(log), "--spec", json.dumps(spec)],
        cwd=tmp_path,
        start_new_session=True,
    )
    try:
        for _ in range(400):
            if record.exists() and "settings:" in log.read_text():
                break
            time.sleep(0.05)
        seen = json.loads(record.read_text())
    finally:
        sup.terminate()
        sup.wait(60)
    argv = seen["argv"]
    assert argv[argv.index("--chat-template") + 1] == hostile  # one argument, as written: no shell
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "PWNED2").exists()
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and "--api-key" not in argv
    assert seen["key"] == KEY
    text = log.read_text()
    assert "settings: api_key=***" in text and KEY not in text
    assert KEY not in state.read_text() and KEY not in json.dumps(spec["api_key"])


def test_a_study_its_servers_refused_reads_failed_with_the_cause_not_not_run(tmp_path: Path) -> None:
    """Every measurement of the recorded embedded-default study replaced by what a refused client records
    (stages.check_access): the verdict reads failed and names the key, never "not run: nothing to compare"."""
    import shutil

    import pyarrow.parquet as pq

    from worthit.report import build
    from worthit.report.decide import FAILED

    fixture = ROOT / "tests" / "fixtures" / "embedded-default"
    results = tmp_path / "results"
    shutil.copytree(fixture, results, ignore=shutil.ignore_patterns("config.yaml"))
    cfg = validate(yaml.safe_load((fixture / "config.yaml").read_text()))
    reason = secrets.auth_failure(401, "http://127.0.0.1:8000/v1/models", None)
    for f in results.glob("variant~*/**/*.parquet"):
        name = pq.read_schema(f).metadata[b"worthit.table"].decode()
        meta = schemas.read(f, schemas.table_named(name)).metadata
        schemas.write_failure(f, schemas.table_named(name), reason, metadata={"concurrency": meta.get("concurrency")})
    r = build.from_dir(cfg, results)
    (v,) = r.rows(schemas.REPORT_VERDICTS)
    assert v["outcome"] == FAILED and "requires an API key" in v["reason"], v
    assert "not run" not in v["outcome"]


@pytest.mark.parametrize("schedule", ["open_loop", "sessions"])
def test_a_refused_request_stops_an_open_loop_from_starting_more_arrivals(
    guarded: str, schedule: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from worthit.loadgen import transports
    from worthit.loadgen.scheduling import open_loop

    sent = []
    real = transports.Client.send

    async def counting(self: Any, spec: RequestSpec, request_id: int) -> Any:
        sent.append(request_id)
        return await real(self, spec, request_id)

    monkeypatch.setattr(transports.Client, "send", counting)
    cfg = ClientConfig(base_url=guarded, model="calibration")
    n = 100  # 10 arrivals a second: ten seconds of schedule
    with pytest.raises(Refused):
        if schedule == "open_loop":
            asyncio.run(open_loop(cfg, specs(n), 10.0, seed=1))
        else:
            asyncio.run(sessions_loop(cfg, [specs(1)] * n, arrivals_s=[i / 10 for i in range(n)]))
    assert len(sent) < n / 2, len(sent)


def test_metrics_scrapes_and_the_timeline_send_the_key() -> None:
    """A gateway may guard /metrics too: every scrape carries the key (a server that records each request's
    Authorization header)."""
    import http.server
    import threading

    from worthit.cli import _counters
    from worthit.loadgen.timeline import Scraper
    from worthit.stages import scrape

    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization"))
            body = b"vllm:num_requests_running 0\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        scrape(url, KEY)
        assert _counters(url, KEY) is not None
        sc = Scraper(url, 0.05, api_key=KEY).start()
        time.sleep(0.3)
        assert sc.stop()
    finally:
        server.shutdown()
    assert len(seen) >= 3 and set(seen) == {f"Bearer {KEY}"}


def test_lm_eval_gets_the_key_in_its_environment_not_its_arguments() -> None:
    from worthit.experiments.accuracy import measure as accuracy

    env = accuracy.lm_eval_env({"OPENAI_API_KEY": "stale-key-value"}, KEY)
    assert env["OPENAI_API_KEY"] == KEY  # lm-eval's local-completions reads it there
    assert accuracy.lm_eval_env({}, None)["OPENAI_API_KEY"] == "EMPTY"
    task = accuracy.TaskSpec.from_config({"name": "worthit_arc"})
    cmd = accuracy.lm_eval_command(
        "python", task, model="m", base_url="http://127.0.0.1:1", tokenizer="t", include_path="i", output_path="o"
    )
    assert KEY not in " ".join(cmd) and "api_key" not in " ".join(cmd)
