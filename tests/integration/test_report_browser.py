"""The HTML report as a person opening it sees it: headless Chromium at 1400x900 (worthit.testing.browser).

On the H200 real-weights sample (examples/h200-qwen/results, its per-request rows in main's history, read
from their compact extract on main: tests/evidence.py) and on the embedded default's committed full run
(examples/embedded-default/results), every optimisation's verdict and headline effect lie in the first screen,
read from the page's element boxes, and no table is wider than the page with every fold open.

Needs the Debian package ``chromium`` (.ci/run installs it); skipped with that reason when absent.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from matplotlib.image import imread

from tests import evidence
from worthit import schemas
from worthit.config import load, validate
from worthit.report import build
from worthit.testing import browser

ROOT = Path(__file__).resolve().parents[2]
STUDIES = {
    "h200-qwen": ("h200-qwen/results", ROOT / "config" / "studies" / "h200-qwen2.5-coder.yaml"),
    "embedded-default": (
        ROOT / "examples" / "embedded-default" / "results",
        ROOT / "examples" / "embedded-default" / "results" / "report" / "config.yaml",
    ),
}
# backgrounds of the verdict badges (report/templates/report.html.j2): adopt, reject, inconclusive, not applicable,
# failed (not run is white with a dashed border)
BADGES = [
    np.array(c) / 255
    for c in ((0xD4, 0xED, 0xDA), (0xF8, 0xD7, 0xDA), (0xFF, 0xF3, 0xCD), (0xE2, 0xE3, 0xE5), (0xF5, 0xC6, 0xA5))
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(browser.executable() is None, reason="chromium is not installed (apt-get install chromium)"),
]


def _config(results: Path, configfile: Path | None) -> dict:
    if configfile is not None:
        return load(configfile)
    return validate(yaml.safe_load((results / "config.yaml").read_text()))


@pytest.fixture(scope="module", params=sorted(STUDIES))
def rendered(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    where, configfile = STUDIES[request.param]
    results = evidence.compact(where) if isinstance(where, str) else where
    out = tmp_path_factory.mktemp(request.param)
    report = build.from_dir(_config(results, configfile), results)
    page = build.write_all(report, out / "report", out / "report.html", {})
    return page, report.rows(schemas.REPORT_VERDICTS)


def test_every_verdict_and_headline_effect_is_on_the_first_screen(rendered: tuple[Path, list[dict]]) -> None:
    page, verdicts = rendered
    lay = browser.layout(page)
    assert (lay.width, lay.height) == browser.SIZE
    optimisations = [v for v in verdicts if v["role"] == "optimisation"]
    assert [r["variant"] for r in lay.rows] == [v["variant"] for v in optimisations]
    for r, v in zip(lay.rows, optimisations, strict=True):
        assert r["verdictText"] == v["outcome"] and r["effectText"] == v["effect"]
    assert lay.off_first_screen() == []


def test_no_table_is_wider_than_the_page(rendered: tuple[Path, list[dict]]) -> None:
    page, _ = rendered
    lay = browser.layout(page)
    assert len(lay.tables) > 5 and lay.overflowing() == []


def test_the_first_screen_shows_the_verdict_badges(rendered: tuple[Path, list[dict]]) -> None:
    page, verdicts = rendered
    shot = browser.screenshot(page, page.with_name("first-screen.png"))
    img = imread(shot)[:, :, :3]
    assert img.shape[:2] == (browser.SIZE[1], browser.SIZE[0])
    badge = np.any([np.all(np.abs(img - c) < 0.02, axis=2) for c in BADGES], axis=0)
    rows = np.nonzero(badge.any(axis=1))[0]
    assert badge.sum() > 100 * sum(v["role"] == "optimisation" for v in verdicts)  # a badge a row
    assert rows.min() < 200  # the first one right under the title
