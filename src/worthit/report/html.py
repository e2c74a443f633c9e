"""One self-contained HTML page: verdicts first, then deployments, tables, figures (inline SVG) and
provenance. No external CSS, scripts or images, so the file can be mailed or archived as it is."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from worthit.report.analysis import Analysis
from worthit.report.tables import TITLES, fmt, fmt_measure, shown

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1200px;
color:#222;padding:0 1em;line-height:1.4}
h1{margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:1.8em}
table{border-collapse:collapse;margin:.6em 0;font-size:13px;width:100%}
th,td{border:1px solid #ccc;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#f0f3f7}tr:nth-child(even) td{background:#fafafa}
.verdict{font-weight:bold;padding:2px 8px;border-radius:4px;white-space:nowrap}
.adopt{background:#d4edda;color:#155724}.reject{background:#f8d7da;color:#721c24}
.not-applicable{background:#e2e3e5;color:#383d41}.no-measurable-difference{background:#fff3cd;color:#856404}
pre{background:#f6f8fa;padding:.7em;overflow-x:auto;font-size:12px;white-space:pre-wrap;word-break:break-all}
figure{margin:1em 0}figcaption{font-size:13px;color:#555}figure svg{max-width:100%;height:auto}
.muted{color:#666;font-size:13px}details{margin:.3em 0}
"""


def _cell(table: str, col: str, r: Mapping[str, Any], measures: Sequence[str]) -> str:
    if col in measures:
        return html.escape(fmt_measure(r, col))
    v = r.get(col)
    if table == "report_verdicts" and col == "verdict" and v:
        return f'<span class="verdict {str(v).replace(" ", "-")}">{html.escape(str(v))}</span>'
    return html.escape(fmt(v))


def table_html(table: str, rows: Sequence[Mapping[str, Any]]) -> str:
    cols, measures, rows = shown(table, rows)
    if not rows:
        return '<p class="muted">No rows: this study has no such results.</p>'
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h in cols)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(table, c, r, measures)}</td>" for c, _ in cols) + "</tr>" for r in rows
    )
    return f'<table id="{table}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _svg(path: Path) -> str:
    text = path.read_text()
    text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)


def provenance(a: Analysis) -> dict[str, Any]:
    files = a.results.all_files()
    meta = next((f.metadata for f in files if f.metadata.get("hardware")), {})
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
        "peak_bandwidth": (
            f"{a.bandwidth.gb_s:g} GB/s ({a.bandwidth.name}; {a.bandwidth.source})"
            if a.bandwidth
            else "unknown (MBU n/a)"
        ),
        "config_hash": meta.get("config_hash"),
        "results_from": sorted({f.metadata.get("created_at", "") for f in files if f.metadata.get("created_at")})[:1]
        + sorted({f.metadata.get("created_at", "") for f in files if f.metadata.get("created_at")})[-1:],
        "variants": {},
    }
    for v in a.variants:
        p = a.results.variant(v).provenance()
        out["variants"][v] = {
            "model": p.get("model"),
            "engine_args": a.engine_args.get(v),
            "extra_args": a.extra_args.get(v) or None,
        }
    return out


def render(a: Analysis, tables: Mapping[str, list[dict[str, Any]]], figures: Mapping[str, Mapping[str, Any]]) -> str:
    desc = str(a.cfg.get("description") or "").strip()
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>worthit: {html.escape(a.study)}</title><style>{CSS}</style></head><body>",
        f"<h1>worthit study report: {html.escape(a.study)}</h1>",
        f'<p class="muted">{html.escape(desc)}<br>Baseline: <b>{html.escape(a.baseline)}</b>. Generated '
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}. Every figure carries n and a 95% interval in brackets; a "
        "change whose interval overlaps the baseline's is reported as no measurable difference.</p>",
    ]
    rules = a.rules
    order = [
        "report_verdicts",
        "report_deployments",
        "report_comparison",
        "report_experiments",
        "report_capability",
        "report_capacity",
        "report_levels",
    ]
    for name in order:
        if name not in tables:
            continue
        parts.append(f'<h2 id="h-{name}">{html.escape(TITLES[name])}</h2>')
        if name == "report_verdicts":
            parts.append(
                f'<p class="muted">Rules (config <code>decide:</code>): accuracy drop at most '
                f"{rules.max_accuracy_drop_pt:g} pt per task"
                + "".join(f", {html.escape(t)} {b:g} pt" for t, b in rules.max_accuracy_drop_pt_by_task.items())
                + f"; a benefit is a speed-up of at least {rules.min_speedup:g}x"
                + (" whose 95% interval is clear of the baseline's" if rules.require_significance else "")
                + f"; predicted speculative speed-ups below {rules.min_predicted_speedup:g}x are flagged.</p>"
            )
        parts.append(table_html(name, tables[name]))
        if name == "report_deployments":
            for r in tables[name]:
                if r.get("command"):
                    parts.append(
                        f"<p><b>{html.escape(r['scenario'])}</b> ({html.escape(str(r['variant']))}, "
                        f"max-num-seqs {r['max_num_seqs']}):</p><pre>{html.escape(r['command'])}</pre>"
                    )
    failed = [f for f in a.results.all_files() if not f.ok]
    parts.append('<h2 id="h-failures">Failed or not applicable experiments</h2>')
    if failed:
        for f in failed:
            parts.append(
                f"<details><summary><b>{html.escape(f.variant or '')}</b> {html.escape(f.experiment)}: "
                f"{html.escape(f.status)} — {html.escape(f.reason)}</summary>"
                f"<pre>{html.escape(f.log_tail or '(no log tail)')}</pre></details>"
            )
    else:
        parts.append('<p class="muted">None: every experiment produced results.</p>')
    parts.append('<h2 id="h-figures">Figures</h2>')
    if not figures:
        parts.append('<p class="muted">No figures: no measured data to plot.</p>')
    for name, fig in figures.items():
        parts.append(
            f'<figure id="fig-{name}">{_svg(Path(fig["svg"]))}'
            f"<figcaption>{html.escape(str(fig['caption']))}</figcaption></figure>"
        )
    parts.append('<h2 id="h-provenance">Provenance</h2>')
    parts.append(f"<pre>{html.escape(yaml.safe_dump(provenance(a), sort_keys=False, default_flow_style=False))}</pre>")
    parts.append(
        "<details><summary>Study config (validated, defaults filled in)</summary>"
        f"<pre>{html.escape(yaml.safe_dump(dict(a.cfg), sort_keys=False))}</pre></details>"
    )
    parts.append("</body></html>")
    return "\n".join(parts)


def write(
    a: Analysis,
    tables: Mapping[str, list[dict[str, Any]]],
    figures: Mapping[str, Mapping[str, Any]],
    out: str | Path,
) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(render(a, tables, figures))
    tmp.replace(out)
    return out
