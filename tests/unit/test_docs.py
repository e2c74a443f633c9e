"""The README fits its reader and its documentation holds together: at most 300 lines, the GPU command in the
first 100, every relative link resolving, and the config guide's example a valid study."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from worthit.config import validate

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, ROOT / "config" / "README.md", ROOT / "examples" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_readme_is_short_and_reaches_the_gpu_command_early() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300
    headings = [ln for ln in lines if ln.startswith("## ")]
    assert headings[:3] == ["## Quick start", "## Run it on your GPU", "## What you get"]
    first_gpu = next(i for i, ln in enumerate(lines) if "--resources gpu=" in ln and "snakemake" in ln)
    assert first_gpu < 100 and any("worthit plan" in ln for ln in lines[:first_gpu])
    assert headings[-1] == "## Documentation"


def test_every_relative_link_of_the_documentation_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s#]+)(?:#[^)]*)?\)", page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_config_guide_s_example_is_a_valid_study() -> None:
    text = (ROOT / "config" / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block is not None
    cfg = validate(yaml.safe_load(block.group(1)))
    assert cfg["baseline_variant"] in cfg["variants"] and len(cfg["variants"]) >= 3
