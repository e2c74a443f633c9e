#!/usr/bin/env python3
"""Save the first screen of a study's report, as a person opening it sees it, and check what it shows.

    .venvs/workflow/bin/python tools/screenshot_report.py --page examples/h200-qwen/results/report.html \
        --out examples/h200-qwen/first-screen.png
    .venvs/workflow/bin/python tools/screenshot_report.py --results ../worthit-evidence/examples/h200-qwen/results \
        --configfile config/studies/h200-qwen2.5-coder.yaml --out examples/h200-qwen/first-screen.png
    .venvs/workflow/bin/python tools/screenshot_report.py --results examples/embedded-default/results \
        --configfile config/config.yaml

It renders the report of the results folder (``--page``: takes a rendered page as it is) into a temporary
folder, so the folder itself is left as it is, opens it in headless Chromium at 1400x900 and writes the
screenshot to ``--out`` (default: ``first-screen.png`` beside the results folder, e.g.
examples/h200-qwen/first-screen.png). A GPU sample's raw results are in commit 40526c6 (examples/README.md); its
rendered page is here. It then checks the page's layout (worthit.testing.browser): every
optimisation's verdict and headline effect in the first screen, no table wider than the page; it names what
is not and exits 1. Needs Debian's ``chromium`` (apt-get install chromium).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from worthit.config import load
from worthit.report import build
from worthit.testing import browser


def render(results: Path, configfile: Path, out: Path) -> Path:
    """The report of ``results`` under ``configfile``, written into ``out`` (nothing in ``results`` changes)."""
    report = build.from_dir(load(configfile), results)
    return build.write_all(report, out / "report", out / "report.html", {"config_file": str(configfile)})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--results", type=Path, help="a results/<study> folder (variant~*/ inside)")
    src.add_argument("--page", type=Path, help="a rendered report.html, taken as it is")
    ap.add_argument("--configfile", type=Path, help="the study config (default: <results>/report/config.yaml)")
    ap.add_argument("--out", type=Path, help="the PNG (default: first-screen.png beside the results folder)")
    ap.add_argument("--width", type=int, default=browser.SIZE[0])
    ap.add_argument("--height", type=int, default=browser.SIZE[1])
    a = ap.parse_args(argv)
    size = (a.width, a.height)
    with tempfile.TemporaryDirectory() as tmp:
        if a.page:
            page = a.page
            out = a.out or page.parent.parent / "first-screen.png"
        else:
            cfg = a.configfile or a.results / "report" / "config.yaml"
            page = render(a.results, cfg, Path(tmp))
            out = a.out or a.results.parent / "first-screen.png"
        browser.screenshot(page, out, size)
        lay = browser.layout(page, size)
    problems = lay.off_first_screen() + lay.overflowing()
    print(f"{out}: {len(lay.rows)} optimisations on the first screen of {size[0]}x{size[1]}")
    for p in problems:
        print(f"  not as it should be: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
