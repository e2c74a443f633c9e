"""The device bundle (tools/device/make-parts.sh) carries every package the workflow imports on the GPU machine:
what envs/workflow.txt names for running (not its lint and test tools) and what those need in turn, each either
pinned in tools/device/workflow-freeze.txt or already on the device image (tools/device/image-packages.txt).
A package missing from both reaches the machine as an ImportError after its parts were carried (optuna, the
tune's search, was: examples/h200-qwen/README.md, "The tune on an H100")."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from worthit.config import ROOT

DEVICE = ROOT / "tools" / "device"
DEV_TOOLS = {"pytest", "pytest-timeout", "pytest-xdist", "ruff", "mypy", "snakefmt"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def listed(path: Path) -> set[str]:
    out = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out.add(norm(re.split(r"[=<>!~;\[ ]", line, maxsplit=1)[0]))
    return out


def needed(roots: set[str], image: set[str]) -> set[str]:
    """The roots and what they require (no extras, markers read for this interpreter), as installed here; a
    package the image has comes with what it needs there (its version here may need more)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in image:
            continue
        try:
            reqs = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for r in map(Requirement, reqs):
            if r.marker is None or r.marker.evaluate({"extra": ""}):
                todo.append(norm(r.name))
    return seen


def test_every_package_the_workflow_runs_with_is_in_the_device_bundle_or_image() -> None:
    roots = listed(ROOT / "envs" / "workflow.txt") - DEV_TOOLS
    assert "optuna" in roots and "snakemake" in roots
    carried = listed(DEVICE / "workflow-freeze.txt") | listed(DEVICE / "evaluate-freeze.txt")
    image = listed(DEVICE / "image-packages.txt")
    missing = sorted(needed(roots, image) - carried - image)
    assert missing == [], f"add to tools/device/workflow-freeze.txt (pinned as bin/setup resolved them): {missing}"
