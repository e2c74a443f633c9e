"""The ``hf:`` model source end to end: ``python -m worthit.models`` (as the fetch_model rule runs it, in the
serve environment, with the real ``huggingface_hub``) against a local server that speaks the hub's download API
(``HF_ENDPOINT``, tests/hubserver.py) and serves SmolLM2's converted files. No network.

Run (builds the embedded model first when it is missing):
    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/pytest tests/integration/test_hf_hub.py
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hubserver import FakeHubRepo, serve_repo

pytestmark = pytest.mark.vllm  # needs the serve environment (huggingface_hub as the workflow uses it)

REPO_ID = "worthit-test/SmolLM2-135M-converted"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def hub(model_dir: Path) -> Iterator[FakeHubRepo]:
    with serve_repo(FakeHubRepo.from_folder(REPO_ID, model_dir)) as repo:
        yield repo


def fetch_cli(serve_python: Path, hub: FakeHubRepo, source: str, out: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
    env |= {
        "HF_ENDPOINT": hub.url,
        "HF_HOME": str(out.parent / "hf-home"),  # the hub cache's refs/ must not land in the user's home
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    cmd = [str(serve_python), "-m", "worthit.models", "--name", "smol", "--source", source, "--out", str(out)]
    return subprocess.run(cmd, env=env, cwd=out.parent, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("revision", ["", "@main", "@COMMIT"])
def test_hf_source_records_the_commit_the_hub_announced(
    serve_python: Path, hub: FakeHubRepo, model_dir: Path, tmp_path: Path, revision: str
) -> None:
    revision = revision.replace("COMMIT", hub.commit)
    source = f"hf:{REPO_ID}{revision}"
    out = tmp_path / "smol"
    hub.requests.clear()
    proc = fetch_cli(serve_python, hub, source, out)
    assert proc.returncode == 0, proc.stderr[-4000:]

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"] == source
    assert manifest["revision"] == hub.commit, "the manifest must name the commit the hub resolved"
    assert manifest["extra"]["revision_requested"] == (revision[1:] or None)
    # every file the hub holds, byte for byte: the manifest's digests, the served files and the original folder
    listed = {f["path"]: f["sha256"] for f in manifest["files"]}
    assert listed == {p: f.sha256 for p, f in hub.files.items()}
    assert listed == {p: sha256_of(model_dir / p) for p in listed}
    assert {f["path"]: f["bytes"] for f in manifest["files"]} == {p: len(f.data) for p, f in hub.files.items()}
    assert manifest["parameters"] and manifest["parameters"] > 100_000_000
    assert all(sha256_of(out / "model" / p) == sha for p, sha in listed.items())

    # they came through the hub's API: the revision asked once, every file fetched at the resolved commit
    asked = [path for method, path, status in hub.requests if status == 200 and path.startswith("/api/models/")]
    assert asked and asked[0].split("?")[0].endswith(f"/revision/{revision[1:]}" if revision else REPO_ID)
    fetched = {p.split(f"/resolve/{hub.commit}/", 1)[1] for m, p, s in hub.requests if m == "GET" and "/resolve/" in p}
    assert fetched == set(hub.files)
    assert all(status in (200, 206) for _, _, status in hub.requests), hub.requests


def test_unknown_revision_is_a_clear_error(serve_python: Path, hub: FakeHubRepo, tmp_path: Path) -> None:
    proc = fetch_cli(serve_python, hub, f"hf:{REPO_ID}@v9.9", tmp_path / "smol")
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert f"hf:{REPO_ID}@v9.9" in proc.stderr and "no such revision" in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "smol" / "manifest.json").exists()


def test_unknown_repository_is_a_clear_error(serve_python: Path, hub: FakeHubRepo, tmp_path: Path) -> None:
    proc = fetch_cli(serve_python, hub, "hf:worthit-test/no-such-model", tmp_path / "smol")
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert "hf:worthit-test/no-such-model" in proc.stderr and "no such model" in proc.stderr, proc.stderr[-2000:]
