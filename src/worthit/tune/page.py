"""The tune in pages: ``results/<study>-tune/tune/report.html`` (the tune's summary as a page of its own) and
the section of the study's report that shows it (:func:`section`), both rendered from ``summary.md`` and
``pareto.svg`` (:mod:`.summary`) so the three say the same.

The study report finds the tune beside its results: ``results/<study>-tune/tune/`` for ``results/<study>``
(the tune's own study, ``results/<study>-tune``, holds it in ``tune/``).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from markdown_it import MarkdownIt

from worthit import atomic
from worthit.report.render import inline_svg

SUMMARY = "summary.md"
PARETO = "pareto.svg"
TUNE_SUFFIX = "-tune"


def tune_folder(results: str | Path) -> Path | None:
    """The tune of the study whose results are in ``results``, where one has written its summary."""
    results = Path(results)
    for d in (results.with_name(results.name + TUNE_SUFFIX) / "tune", results / "tune"):
        if (d / SUMMARY).is_file():
            return d
    return None


def body_html(tdir: Path) -> str:
    """summary.md as HTML (raw HTML in it escaped), the Pareto figure inline where the summary shows it."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    out = md.render((tdir / SUMMARY).read_text(encoding="utf-8"))
    svg = inline_svg(tdir / PARETO) if (tdir / PARETO).is_file() else ""
    return re.sub(r'<p><img src="pareto\.svg"[^>]*></p>', lambda _m: f"<figure>{svg}</figure>" if svg else "", out)


def headline(tdir: Path) -> str:
    """One line: each scenario's recommendation, as the summary's "What to run" names it."""
    picks = re.findall(r"^- \*\*([^*]+)\*\*(?: \(([^)]*)\))?", (tdir / SUMMARY).read_text(encoding="utf-8"), re.M)
    return "; ".join(f"{what} ({how.split(',')[0]})" if how else what for what, how in picks) or "no candidate yet"


def section(results: str | Path) -> dict[str, str] | None:
    """The study report's tune section (its one-line summary and its HTML), when the study has a tune."""
    tdir = tune_folder(results)
    if tdir is None:
        return None
    body = body_html(tdir)
    body = re.sub(r"<h1>.*?</h1>\n?", "", body, count=1)  # the section has its own heading
    return {"line": headline(tdir), "html": body, "folder": str(tdir)}


STYLE = """body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}
code{background:#f4f4f4;padding:.1em .3em;word-break:break-all}figure svg{max-width:100%;height:auto}"""


def write_page(tdir: Path) -> Path:
    """``report.html`` in the tune's folder: the summary, self-contained (the figure inline)."""
    first = (tdir / SUMMARY).read_text(encoding="utf-8").split("\n", 1)[0]
    title = html.escape(first.lstrip("# ").strip() or "worthit tune")
    page = (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{STYLE}</style></head><body>\n{body_html(tdir)}</body></html>\n"
    )
    path = tdir / "report.html"
    atomic.write_text(path, page)
    return path
