"""Carry large files to the device machine in parts small enough for one `device` call each.

Several files (components) are laid end to end as one stream and cut into equal parts; each part goes
into its own git-ignored folder ``.gpu-qNN/`` with ``parts.json`` (every part's and component's size and
sha256, and where each component starts in the stream). A component can be rebuilt on the device as
soon as the parts that cover it have arrived, so work on it starts while later parts are in transit.

Here:    python tools/device/parts.py split FILE... [--part-mib N]   # N: 63 MiB minus the working tree
Device:  python3 tools/device/parts.py receive [--into /tmp/chunks]  # copy the carried parts, check them
         python3 tools/device/parts.py has NAME                       # exit 0 when NAME is in the stream
         python3 tools/device/parts.py ready NAME                     # exit 0 when NAME can be rebuilt
         python3 tools/device/parts.py extract NAME OUT               # rebuild it (sha256 checked)
         python3 tools/device/parts.py status                         # what arrived, what is ready
Standard library only (it runs before anything is installed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20
CALL_LIMIT_MIB = 64  # what one call carries: the working tree plus the carried paths
PREFIX = ".gpu-q"
CHUNKS = Path("/tmp/chunks")


def sha256(path: Path, start: int = 0, length: int | None = None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        fh.seek(start)
        left = length if length is not None else math.inf
        while left > 0 and (block := fh.read(int(min(1 << 22, left)))):
            h.update(block)
            left -= len(block)
    return h.hexdigest()


def tree_bytes() -> int:
    """What every call carries besides its carried paths: tracked and untracked, not ignored files."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    files = {ROOT / f.decode() for f in out.split(b"\0") if f}
    return sum(f.stat().st_size for f in files if f.is_file() and not f.is_symlink())


def split(files: list[Path], part_mib: int | None, out_root: Path = ROOT) -> list[Path]:
    tree = tree_bytes()
    if part_mib is None:  # leave 1 MiB of room beside the tree as it is now
        part_mib = min(60, CALL_LIMIT_MIB - 1 - math.ceil(tree / MIB))
    if part_mib < 1 or part_mib * MIB + tree > CALL_LIMIT_MIB * MIB:
        raise SystemExit(
            f"parts of {part_mib} MiB + the {tree / MIB:.1f} MiB working tree exceed what a call carries "
            f"({CALL_LIMIT_MIB} MiB): move large untracked or tracked folders out of the checkout first "
            "(examples/: mkdir -p /tmp/hold && mv examples /tmp/hold/), then make the parts again"
        )
    size = part_mib * MIB
    components, offset = [], 0
    for f in files:
        n = f.stat().st_size
        components.append({"name": f.name, "offset": offset, "bytes": n, "sha256": sha256(f)})
        offset += n
    total, parts = offset, []
    for old in out_root.glob(f"{PREFIX}*"):
        shutil.rmtree(old)
    n_parts = math.ceil(total / size)
    width = max(2, len(str(n_parts - 1)))
    stream = _Stream(files)
    for i in range(n_parts):
        folder = out_root / f"{PREFIX}{i:0{width}d}"
        folder.mkdir()
        name = f"q.{i:0{width}d}"
        data = stream.read(size)
        (folder / name).write_bytes(data)
        parts.append({"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    meta = {"part_bytes": size, "bytes": total, "components": components, "parts": parts}
    for i in range(n_parts):
        (out_root / f"{PREFIX}{i:0{width}d}" / "parts.json").write_text(json.dumps(meta, indent=1))
    print(
        f"{n_parts} parts of {part_mib} MiB ({total / 1e6:,.0f} MB; working tree {tree / MIB:.1f} MiB): "
        f"{PREFIX}{0:0{width}d} .. {PREFIX}{n_parts - 1:0{width}d}"
    )
    for c in components:
        first, last = c["offset"] // size, (c["offset"] + c["bytes"] - 1) // size
        print(f"  {c['name']}: {c['bytes']:,} bytes in parts {first}..{last}")
    return [out_root / f"{PREFIX}{i:0{width}d}" for i in range(n_parts)]


class _Stream:
    """The files read one after another as one byte stream."""

    def __init__(self, files: list[Path]) -> None:
        self.files = list(files)
        self.fh = open(self.files.pop(0), "rb")  # noqa: SIM115 - closed as the stream moves on

    def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            block = self.fh.read(n - len(out))
            if block:
                out += block
                continue
            self.fh.close()
            if not self.files:
                break
            self.fh = open(self.files.pop(0), "rb")  # noqa: SIM115
        return bytes(out)


def _meta(into: Path = CHUNKS) -> dict:
    p = into / "parts.json"
    if not p.exists():
        raise SystemExit(f"{p}: no parts received yet")
    return json.loads(p.read_text())


def receive(into: Path = CHUNKS, src_root: Path = ROOT) -> list[str]:
    """Copy the parts carried in this call (any .gpu-q*/ folder present) that are not there yet; check each."""
    into.mkdir(parents=True, exist_ok=True)
    got = []
    for folder in sorted(src_root.glob(f"{PREFIX}*")):
        meta_src = folder / "parts.json"
        if not meta_src.exists():
            continue
        meta = json.loads(meta_src.read_text())
        if (into / "parts.json").exists() and _meta(into)["parts"] != meta["parts"]:
            raise SystemExit(f"{meta_src} describes other parts than {into}/parts.json: remove {into} first")
        shutil.copy(meta_src, into / "parts.json")
        want = {p["name"]: p for p in meta["parts"]}
        for f in folder.iterdir():
            if f.name not in want or (into / f.name).exists():
                continue
            if f.stat().st_size != want[f.name]["bytes"] or sha256(f) != want[f.name]["sha256"]:
                raise SystemExit(f"{f}: size or sha256 differs from parts.json")
            tmp = into / (f.name + ".tmp")
            shutil.copy(f, tmp)
            os.replace(tmp, into / f.name)
            got.append(f.name)
    return got


def _needed(meta: dict, comp: dict) -> list[dict]:
    size = meta["part_bytes"]
    first, last = comp["offset"] // size, (comp["offset"] + comp["bytes"] - 1) // size
    return meta["parts"][first : last + 1]


def _component(meta: dict, name: str) -> dict:
    for c in meta["components"]:
        if c["name"] == name:
            return c
    raise SystemExit(
        f"parts.json has no component {name!r} (it has: {', '.join(c['name'] for c in meta['components'])})"
    )


def has(name: str, into: Path = CHUNKS) -> bool:
    return any(c["name"] == name for c in _meta(into)["components"])


def ready(name: str, into: Path = CHUNKS) -> bool:
    meta = _meta(into)
    return all((into / p["name"]).exists() for p in _needed(meta, _component(meta, name)))


def extract(name: str, out: Path, into: Path = CHUNKS) -> None:
    meta = _meta(into)
    comp = _component(meta, name)
    missing = [p["name"] for p in _needed(meta, comp) if not (into / p["name"]).exists()]
    if missing:
        raise SystemExit(f"{name}: parts not received yet: {', '.join(missing)}")
    size, pos, left = meta["part_bytes"], comp["offset"], comp["bytes"]
    tmp = out.with_name(out.name + ".partial")
    out.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with open(tmp, "wb") as fo:
        while left > 0:
            part = meta["parts"][pos // size]
            with open(into / part["name"], "rb") as fh:
                fh.seek(pos % size)
                block = fh.read(min(left, size - pos % size))
            fo.write(block)
            h.update(block)
            pos += len(block)
            left -= len(block)
    if h.hexdigest() != comp["sha256"]:
        raise SystemExit(f"{out}: sha256 {h.hexdigest()} differs from parts.json's {comp['sha256']}")
    os.replace(tmp, out)


def status(into: Path = CHUNKS) -> str:
    meta = _meta(into)
    have = sum((into / p["name"]).exists() for p in meta["parts"])
    comps = [f"{c['name']}: {'ready' if ready(c['name'], into) else 'waiting'}" for c in meta["components"]]
    return f"parts {have}/{len(meta['parts'])}; " + "; ".join(comps)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("split")
    s.add_argument("files", nargs="+", type=Path)
    s.add_argument("--part-mib", type=int)
    r = sub.add_parser("receive")
    r.add_argument("--into", type=Path, default=CHUNKS)
    for name in ("has", "ready", "extract"):
        x = sub.add_parser(name)
        x.add_argument("name")
        if name == "extract":
            x.add_argument("out", type=Path)
        x.add_argument("--into", type=Path, default=CHUNKS)
    st = sub.add_parser("status")
    st.add_argument("--into", type=Path, default=CHUNKS)
    ns = p.parse_args(argv)
    if ns.cmd == "split":
        split(ns.files, ns.part_mib)
    elif ns.cmd == "receive":
        got = receive(ns.into)
        print(f"received {', '.join(got) or 'nothing new'}; {status(ns.into)}")
    elif ns.cmd == "has":
        return 0 if has(ns.name, ns.into) else 1
    elif ns.cmd == "ready":
        return 0 if ready(ns.name, ns.into) else 1
    elif ns.cmd == "extract":
        extract(ns.name, ns.out, ns.into)
    else:
        print(status(ns.into))
    return 0


if __name__ == "__main__":
    sys.exit(main())
