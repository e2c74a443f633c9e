"""tools/device/parts.py: files laid end to end, cut into parts that fit one device call, received one
part at a time, and each file rebuilt (sha256 checked) as soon as its parts are in."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("device_parts", ROOT / "tools" / "device" / "parts.py")
parts = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parts)  # type: ignore[union-attr]


@pytest.fixture
def files(tmp_path):
    rng = random.Random(7)
    out = []
    for name, n in (("a.tar", 5 * parts.MIB + 123), ("b.gguf", 2 * parts.MIB - 7), ("c.gguf", 3 * parts.MIB)):
        p = tmp_path / "src" / name
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(rng.randbytes(n))
        out.append(p)
    return out


def test_parts_fit_the_call_and_rebuild_each_file_once_its_parts_arrived(files, tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "tree_bytes", lambda: 61 * parts.MIB)  # leaves room for 2 MiB parts
    out = tmp_path / "repo"
    out.mkdir()
    folders = parts.split(files, None, out_root=out)
    total = sum(f.stat().st_size for f in files)
    assert len(folders) == -(-total // (2 * parts.MIB))
    meta = json.loads((folders[0] / "parts.json").read_text())
    assert meta["part_bytes"] == 2 * parts.MIB and [c["name"] for c in meta["components"]] == [
        "a.tar",
        "b.gguf",
        "c.gguf",
    ]
    for f in folders:  # one part per folder, every folder small enough for one call beside the tree
        data = [p for p in f.iterdir() if p.name != "parts.json"]
        assert len(data) == 1 and data[0].stat().st_size <= 2 * parts.MIB

    # the device: one folder per call, in order
    chunks, device = tmp_path / "chunks", tmp_path / "device"
    seen_ready = []
    for f in folders:
        shutil.rmtree(device, ignore_errors=True)
        device.mkdir()
        shutil.copytree(f, device / f.name)
        parts.receive(chunks, src_root=device)
        seen_ready.append([c.name for c in files if parts.ready(c.name, chunks)])
    assert seen_ready[0] == [] and seen_ready[2] == ["a.tar"] and seen_ready[-1] == ["a.tar", "b.gguf", "c.gguf"]
    for f in files:
        parts.extract(f.name, tmp_path / "out" / f.name, chunks)
        assert (tmp_path / "out" / f.name).read_bytes() == f.read_bytes()
    assert parts.status(chunks).startswith(f"parts {len(folders)}/{len(folders)};")


def test_a_damaged_part_is_refused_and_a_missing_one_named(files, tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "tree_bytes", lambda: 61 * parts.MIB)
    out = tmp_path / "repo"
    out.mkdir()
    folders = parts.split(files, None, out_root=out)
    chunks = tmp_path / "chunks"
    parts.receive(chunks, src_root=out)
    os.remove(chunks / json.loads((folders[0] / "parts.json").read_text())["parts"][3]["name"])
    with pytest.raises(SystemExit, match="parts not received yet: q.03"):
        parts.extract("b.gguf", tmp_path / "b.gguf", chunks)
    bad = next(p for p in folders[3].iterdir() if p.name != "parts.json")
    bad.write_bytes(b"x" + bad.read_bytes()[1:])
    with pytest.raises(SystemExit, match="sha256 differs"):
        parts.receive(chunks, src_root=out)


def test_parts_too_big_for_the_tree_are_refused(files, tmp_path, monkeypatch):
    monkeypatch.setattr(parts, "tree_bytes", lambda: 10 * parts.MIB)
    with pytest.raises(SystemExit, match=r"exceed what a call carries \(64 MiB\)"):
        parts.split(files, 60, out_root=tmp_path)


def test_a_tree_larger_than_a_call_is_refused_not_cut_into_negative_parts(files, tmp_path, monkeypatch):
    # a checkout with examples/ in it (157 MiB) once gave "-15 parts of -95 MiB" and removed the old parts
    (tmp_path / f"{parts.PREFIX}00").mkdir()
    monkeypatch.setattr(parts, "tree_bytes", lambda: 157 * parts.MIB)
    with pytest.raises(SystemExit, match="move large .* out of the checkout first"):
        parts.split(files, None, out_root=tmp_path)
    assert (tmp_path / f"{parts.PREFIX}00").is_dir()
