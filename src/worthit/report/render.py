"""Rendering: every view as Markdown (tables.md) and one self-contained HTML page (Jinja2 template).

Nothing here knows a table by name: a view's columns say how each cell reads (:mod:`worthit.report.views`),
and the page lists the views in their order. The HTML has no external CSS, scripts or images, so the file
can be mailed or archived as it is.
"""

from __future__ import annotations

import html as html_lib
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2
import yaml
from markupsafe import Markup

from worthit import atomic
from worthit.report.context import Context
from worthit.report.decide import WORDING
from worthit.report.views import LONG, OUTCOME, View, cell_text, markdown

TEMPLATES = Path(__file__).with_name("templates")
# badge colours by the first words of an outcome: positive, negative, open, out of scope, broken, absent, a control
BADGES = (
    (("adopt", "acceptable", "met", "better"), "good"),
    (("reject", "unacceptable", "miss", "worse"), "bad"),
    (("inconclusive", "undetermined", "not validated"), "open"),
    (("not applicable", "no meaningful difference", "not needed", "information"), "scope"),
    (("failed",), "broken"),
    (("not run", "not measured", "not reported"), "absent"),
    (("control",), "control"),
)


def badge(text: str) -> str:
    t = str(text).lower()
    for words, cls in BADGES:
        if any(t.startswith(w) for w in words):
            return cls
    return "absent"


def markdown_page(ctx: Context, views: Sequence[View]) -> str:
    parts = [f"# {ctx.study.name}: study report", "", f"Baseline: `{ctx.baseline}`.", ""]
    for v in sorted(views, key=lambda v: v.order):
        parts += [f"## {v.title}", "", v.caption, "", markdown(v, ctx.label), ""]
        parts += [f"- {n}" for n in v.notes] + ([""] if v.notes else [])
    return "\n".join(parts)


def _cell_html(row: Mapping[str, Any], col: Any, ctx: Context) -> str:
    text = cell_text(row, col, ctx.label)
    if col.kind == OUTCOME and row.get(col.key):
        return f'<span class="badge {badge(text)}">{html_lib.escape(text)}</span>'
    if col.kind == LONG and len(text) > 60:
        sep = "; " if "; " in text else ": "
        if sep in text:
            head, rest = text.split(sep, 1)
            return f"<details><summary>{html_lib.escape(head)}</summary>{html_lib.escape(rest)}</details>"
    return html_lib.escape(text)


def _svg(path: Path) -> str:
    text = path.read_text()
    text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)


def _md_inline(text: str) -> str:
    """The little Markdown a view's notes use: **bold** and `code`."""
    out = html_lib.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def provenance(ctx: Context) -> dict[str, Any]:
    files = ctx.results.all_files()
    meta = next((f.metadata for f in files if f.metadata.get("hardware")), {})
    created = sorted({str(f.metadata["created_at"]) for f in files if f.metadata.get("created_at")})
    bw = ctx.bandwidth
    out: dict[str, Any] = {
        "worthit_version": meta.get("worthit_version"),
        "vllm_version": next((f.metadata["vllm_version"] for f in files if f.metadata.get("vllm_version")), None),
        "lm_eval_version": next(
            (
                r.get("lm_eval_version")
                for f in files
                if f.table == "accuracy"
                for r in f.rows
                if r.get("lm_eval_version")
            ),
            None,
        ),
        "hardware": meta.get("hardware"),
        "peak_bandwidth": f"{bw.gb_s:g} GB/s ({bw.name}; {bw.source})" if bw else "unknown (MBU n/a)",
        "config_hash": meta.get("config_hash"),
        "results_from": created[:1] + created[-1:],
        "variants": {},
    }
    for v in ctx.variants:
        p = ctx.results.variant(v).provenance()
        out["variants"][v] = {
            "model": p.get("model"),
            "random_weights": ctx.random_weights(v) or None,
            "engine_args": ctx.engine_args(v),
            "extra_args": ctx.extra_args(v) or None,
        }
    return out


def html_page(ctx: Context, views: Sequence[View], figures: Mapping[str, Mapping[str, Any]]) -> str:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(("html", "j2")),
        keep_trailing_newline=True,
    )
    shown = []
    for v in sorted(views, key=lambda v: v.order):
        shown.append(
            {
                "id": v.table.name,
                "title": v.title,
                "caption": v.caption,
                "empty": v.empty,
                "headers": [c.header for c in v.columns],
                "rows": [[Markup(_cell_html(r, c, ctx)) for c in v.columns] for r in v.rows],
                "notes": [Markup(_md_inline(n)) for n in v.notes],
            }
        )
    logs = [
        {
            "variant": f.variant or "",
            "experiment": f.experiment,
            "status": f.status,
            "reason": f.cause,
            "log_tail": f.log_tail or "(no log tail)",
        }
        for f in ctx.results.all_files()
        if not f.ok
    ]
    random = [ctx.label(v) for v in ctx.variants if ctx.random_weights(v)]
    return env.get_template("report.html.j2").render(
        study=ctx.study.name,
        description=str(ctx.study.cfg.get("description") or "").strip(),
        baseline=ctx.baseline,
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        wording=WORDING,
        random=random,
        views=shown,
        logs=logs,
        figures=[{"name": n, "svg": Markup(_svg(Path(f["svg"]))), "caption": f["caption"]} for n, f in figures.items()],
        provenance=yaml.safe_dump(provenance(ctx), sort_keys=False, default_flow_style=False),
        config=yaml.safe_dump(dict(ctx.study.cfg), sort_keys=False),
    )


def write_html(ctx: Context, views: Sequence[View], figures: Mapping[str, Mapping[str, Any]], out: str | Path) -> Path:
    return atomic.write_text(out, html_page(ctx, views, figures))
