"""The HTML report opens in headless Chromium, and its first screen shows the verdict table.

Needs the Debian package ``chromium`` (.ci/run installs it); skipped with that reason when absent.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from matplotlib.image import imread

from worthit.config import validate
from worthit.report import build
from worthit.report.render import write_html

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "embedded-default"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# backgrounds of the verdict badges (report/templates/report.html.j2): adopt, reject, inconclusive, not applicable,
# failed (not run is white with a dashed border)
BADGES = [
    np.array(c) / 255
    for c in ((0xD4, 0xED, 0xDA), (0xF8, 0xD7, 0xDA), (0xFF, 0xF3, 0xCD), (0xE2, 0xE3, 0xE5), (0xF5, 0xC6, 0xA5))
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
]


def chromium(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=120
        )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    cfg = validate(yaml.safe_load((FIXTURE / "config.yaml").read_text()))
    r = build.from_dir(cfg, FIXTURE)
    return write_html(r.ctx, r.views, build.write_figures(r, out / "figures"), out / "report.html")


def test_report_renders_in_chromium_with_the_verdict_table_and_figures(page: Path) -> None:
    proc = chromium("--dump-dom", page.as_uri())
    dom = proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '<table id="report_verdicts">' in dom and "prefix caching (on vs off)" in dom
    assert dom.count("<svg") >= 3  # the figures, inline


def test_first_screen_of_the_report_shows_the_verdict_badges(page: Path) -> None:
    shot = page.with_name("screenshot.png")
    proc = chromium(f"--screenshot={shot}", "--window-size=1280,900", page.as_uri())
    assert proc.returncode == 0 and shot.exists(), proc.stderr[-2000:]
    img = imread(shot)[:, :, :3]
    assert img.shape[:2] == (900, 1280)
    badge = np.any([np.all(np.abs(img - c) < 0.02, axis=2) for c in BADGES], axis=0)
    rows = np.nonzero(badge.any(axis=1))[0]
    assert badge.sum() > 100 and rows.min() < 450  # a verdict badge, in the top half of the first screen
