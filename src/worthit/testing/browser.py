"""The HTML report as a person sees it: headless Chromium (Debian's ``chromium``) opens a page at a window size,
takes a screenshot, or reports where the decision table's cells and every table lie (element boxes).

Used by the report's browser test (tests/integration/test_report_browser.py) and by
``tools/screenshot_report.py``, which saves the first screen of an example's report beside it. The layout is
read by a script added to a copy of the page (the page itself has none): it measures the decision table's
verdict and effect cells with every section folded as the page opens, then opens every fold and measures every
table's right edge against the window, and leaves the figures as JSON in the DOM that ``--dump-dom`` prints.
"""

from __future__ import annotations

import html as html_lib
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
SIZE = (1400, 900)  # a laptop's browser window: the first screen the decision must fit in
MARK = "worthit-layout"
PROBE = (
    """<script>(function(){
function box(e){if(!e)return null;var r=e.getBoundingClientRect();
return {left:r.left,top:r.top,right:r.right,bottom:r.bottom,width:r.width,height:r.height};}
var out={innerWidth:window.innerWidth,innerHeight:window.innerHeight,rows:[],tables:[]};
document.querySelectorAll('#decision tbody tr').forEach(function(tr){
 out.rows.push({variant:tr.id.replace(/^row-/,''),verdict:box(tr.querySelector('td.verdict .badge')),
  effect:box(tr.querySelector('td.effect .headline')),
  effectText:(tr.querySelector('td.effect .headline')||{}).textContent||'',
  verdictText:(tr.querySelector('td.verdict .badge')||{}).textContent||''});});
document.querySelectorAll('details').forEach(function(d){d.open=true;});
document.querySelectorAll('table').forEach(function(t,i){
 out.tables.push({id:t.id||(t.className?'.'+t.className:'table '+i),box:box(t)});});
out.scrollWidth=document.documentElement.scrollWidth;
var pre=document.createElement('pre');pre.id='MARK';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();</script>"""
).replace("MARK", MARK)


def executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    exe = executable()
    if exe is None:
        raise FileNotFoundError("chromium is not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True, timeout=timeout
        )


def screenshot(page: Path, out: Path, size: tuple[int, int] = SIZE) -> Path:
    """The page's first screen at ``size`` as PNG."""
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = run(f"--screenshot={out.resolve()}", f"--window-size={size[0]},{size[1]}", page.resolve().as_uri())
    if proc.returncode != 0 or not out.exists():
        raise RuntimeError(f"chromium could not take the screenshot of {page}: {proc.stderr[-2000:]}")
    return out


@dataclass(frozen=True)
class Layout:
    """Where the page's parts lie in a window of ``width`` x ``height`` (CSS pixels)."""

    width: float
    height: float
    rows: list[dict[str, Any]]  # the decision table's rows: variant, verdict and effect boxes and texts
    tables: list[dict[str, Any]]  # every table with every fold open: id, box
    scroll_width: float

    def off_first_screen(self) -> list[str]:
        """Each decision row whose verdict or effect is not wholly inside the first screen."""
        bad = []
        for r in self.rows:
            for part in ("verdict", "effect"):
                b = r[part]
                if b is None or b["top"] < 0 or b["bottom"] > self.height or b["left"] < 0 or b["right"] > self.width:
                    bad.append(f"{r['variant']}: {part} {b}")
        return bad

    def overflowing(self) -> list[str]:
        """Each table wider than the window (every fold open), and the page itself if it scrolls sideways."""
        bad = [
            f"{t['id']}: right edge {t['box']['right']:.0f}"
            for t in self.tables
            if t["box"]["right"] > self.width + 0.5
        ]
        if self.scroll_width > self.width + 0.5:
            bad.append(f"the page: {self.scroll_width:.0f} px wide")
        return bad


def _measure(page: Path, window: tuple[int, int]) -> dict[str, Any]:
    text = page.read_text()
    with tempfile.TemporaryDirectory() as d:
        copy = Path(d) / page.name
        copy.write_text(text.replace("</body>", PROBE + "</body>", 1) if "</body>" in text else text + PROBE)
        proc = run("--dump-dom", f"--window-size={window[0]},{window[1]}", copy.as_uri())
    dom = proc.stdout
    head = f'<pre id="{MARK}">'
    start = dom.find(head)
    if proc.returncode != 0 or start < 0:
        raise RuntimeError(f"chromium did not measure {page}: {proc.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(html_lib.unescape(dom[start + len(head) : dom.index("</pre>", start)]))
    return found


def layout(page: Path, size: tuple[int, int] = SIZE) -> Layout:
    """Measure ``page`` in Chromium with a viewport of ``size`` (on a copy with the probe script added). A
    window that loads a page to print its DOM keeps room for a browser's frame (a screenshot's does not): the
    window grows by that room, so the viewport is the screenshot's."""
    data = _measure(page, size)
    extra = (size[0] - int(data["innerWidth"]), size[1] - int(data["innerHeight"]))
    if extra != (0, 0):
        data = _measure(page, (size[0] + extra[0], size[1] + extra[1]))
    return Layout(data["innerWidth"], data["innerHeight"], data["rows"], data["tables"], data["scrollWidth"])
