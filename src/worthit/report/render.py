"""Rendering: every view as Markdown (tables.md) and one self-contained HTML page (Jinja2 template).

The page opens with the decision: one row per optimisation (the verdicts view's headline columns,
:mod:`worthit.report.headline`), the controls and helpers under it, a small figure per optimisation, then the
recommended deployments as commands to copy. Every view follows, folded, with a one-line summary; a view's
columns say how each cell reads (:mod:`worthit.report.views`). The HTML has no external CSS, scripts or images,
so the file can be mailed or archived as it is.
"""

from __future__ import annotations

import html as html_lib
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml
from markupsafe import Markup

from worthit import atomic, fmt, schemas, secrets
from worthit.provenance import machine
from worthit.report import experiments
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
    (("suspect",), "suspect"),
)


def badge(text: str) -> str:
    t = str(text).lower()
    for words, cls in BADGES:
        if any(t.startswith(w) for w in words):
            return cls
    return "absent"


def markdown_decision(ctx: Context, verdicts: View | None) -> list[str]:
    """The decision table as Markdown: one row per optimisation, the controls and helpers under it."""
    rows, checks = decision_rows(ctx, verdicts)
    if not rows and not checks:
        return []
    out = ["## Decision", "", "| " + " | ".join(DECISION_HEADERS) + " |", "|" + "---|" * len(DECISION_HEADERS)]
    for r in rows:
        sep = ": " if r.outcome == "suspect" else " ("
        verdict = f"**{r.outcome}**" + (f"{sep}{r.condition}{')' if sep == ' (' else ''}" if r.condition else "")
        effect = r.effect + (f"; per workload: {r.by_workload}" if r.by_workload else "")
        cells = [f"{r.optimisation} (`{r.label}`)", verdict, effect, r.accuracy, r.effort, r.why]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    out += [""] + [f"- **{c.label}** ({c.role}): {c.why}" for c in checks] + [""]
    return out


def own_baselines(ctx: Context) -> list[str]:
    """The baselines other than the study's that variants are judged against (``variants.<v>.baseline``)."""
    return sorted({ctx.base_of(v) for v in ctx.others} - {ctx.baseline})


def markdown_page(ctx: Context, views: Sequence[View]) -> str:
    own = ", ".join(f"`{b}`" for b in own_baselines(ctx))
    said = f"Baseline: `{ctx.baseline}`" + (f", or the one an optimisation names ({own})" if own else "")
    parts = [f"# {ctx.study.name}: study report", "", said + ".", ""]
    parts += markdown_decision(ctx, next((v for v in views if v.table is schemas.REPORT_VERDICTS), None))
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


def inline_svg(path: Path) -> str:
    """A figure file's SVG for inlining in a page: its XML declaration and doctype left out."""
    text = path.read_text()
    text = re.sub(r"^<\?xml[^>]*>\s*", "", text)
    return re.sub(r"<!DOCTYPE[^>]*>\s*", "", text)


def _md_inline(text: str) -> str:
    """The little Markdown a view's notes use: **bold** and `code`."""
    out = html_lib.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", out)


def machines(files: Sequence[Any]) -> list[dict[str, Any]]:
    """Each machine whose stamp the results carry (:func:`worthit.provenance.machine`), with its GPU and how
    many result files it measured, most first: results carried from several sessions, or cards, are not one
    machine's, and the provenance must not read as if they were."""
    found: dict[str, dict[str, Any]] = {}
    for f in files:
        hw = f.metadata.get("hardware")
        name = machine(hw)
        if name is None:
            continue
        entry = found.setdefault(name, {"machine": name, "gpu": hw.get("gpu"), "files": 0})
        entry["files"] += 1
    return sorted(found.values(), key=lambda e: (-e["files"], e["machine"]))


def provenance(ctx: Context) -> dict[str, Any]:
    files = ctx.results.all_files()
    meta = next((f.metadata for f in files if f.metadata.get("hardware")), {})
    several = machines(files)
    created = sorted({str(f.metadata["created_at"]) for f in files if f.metadata.get("created_at")})
    bw = ctx.bandwidth
    out: dict[str, Any] = {
        "worthit_version": meta.get("worthit_version"),
        "vllm_version": next((f.metadata["vllm_version"] for f in files if f.metadata.get("vllm_version")), None),
        **experiments.provenance(ctx),  # the versions of the tools the experiments measured with (lm-eval)
        # one machine's stamp where one measured everything; else each machine and its share of the files
        **({"hardware": meta.get("hardware")} if len(several) <= 1 else {"machines": several}),
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


# The decision table's columns (the seed study's shape: optimisation -> effect -> accuracy cost -> effort ->
# recommendation); the long reason, what would settle it and the interval basis fold out of the last one.
DESCRIPTION_SHOWN = 160  # characters of the study's description above the decision table (the rest folds)
DECISION_HEADERS = ("optimisation", "verdict", "effect as measured [95% interval]", "accuracy cost", "effort", "why")


@dataclass(frozen=True)
class DecisionRow:
    """An optimisation's row of the decision table, or a control's or helper's line under it (its ``role``)."""

    variant: str
    label: str
    optimisation: str
    outcome: str
    badge: str
    condition: str
    effect: str
    by_workload: str
    accuracy: str  # the accuracy cost: the worst task's change and the decision
    accuracy_badge: str
    effort: str
    why: str
    reason: str
    settle: str
    basis: str
    baseline: str
    role: str


def _text(x: Any) -> str:
    return "" if fmt.is_missing(x) else str(x)


def decision_rows(ctx: Context, verdicts: View | None) -> tuple[list[DecisionRow], list[DecisionRow]]:
    """(the optimisations' rows of the decision table, the controls' and helpers' lines) from the verdicts
    view (its role, effect, accuracy_summary and why columns: worthit.report.headline)."""
    rows: list[DecisionRow] = []
    checks: list[DecisionRow] = []
    for r in verdicts.rows if verdicts else []:
        role = _text(r.get("role")) or ("control" if r.get("outcome") == "control" else "optimisation")
        item = DecisionRow(
            variant=r["variant"],
            label=ctx.label(str(r["variant"])),
            optimisation=_text(r.get("optimisation")),
            outcome=_text(r.get("outcome")),
            badge=badge(_text(r.get("outcome"))),
            condition=_text(r.get("condition")),
            effect=_text(r.get("effect")) or _text(r.get("benefit")),
            by_workload=_text(r.get("by_workload")),
            accuracy=_text(r.get("accuracy_summary")) or _text(r.get("accuracy_cost")),
            accuracy_badge=badge(_text(r.get("accuracy_outcome"))),
            effort=_text(r.get("effort")),
            why=_text(r.get("why")) or _text(r.get("reason"))[:200],
            reason=_text(r.get("reason")),
            settle=_text(r.get("settle")),
            basis=_text(r.get("interval_basis")),
            baseline=_text(r.get("baseline")),
            role=role,
        )
        (rows if role == "optimisation" else checks).append(item)
    return rows, checks


def summary_line(v: View) -> str:
    """A folded section's one line: its rows (and variants), and how its outcomes fall."""
    if not v.rows:
        return v.empty
    variants = {r.get("variant") for r in v.rows if r.get("variant")}
    parts = [f"{len(v.rows)} row{'s' if len(v.rows) != 1 else ''}"]
    if len(variants) > 1:
        parts[0] += f" over {len(variants)} variants"
    for col in v.columns:
        if col.kind == OUTCOME:
            counts = Counter(str(r.get(col.key)) for r in v.rows if not fmt.is_missing(r.get(col.key)))
            if counts:
                parts.append(", ".join(f"{n} {o}" for o, n in counts.most_common(4)))
            break
    return "; ".join(parts)


def _view_dict(v: View, ctx: Context) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": v.table.name,
        "title": v.title,
        "caption": v.caption,
        "empty": v.empty,
        "summary": summary_line(v),
        "headers": [c.header for c in v.columns],
        "rows": [[Markup(_cell_html(r, c, ctx)) for c in v.columns] for r in v.rows],
        "notes": [Markup(_md_inline(n)) for n in v.notes],
        "groups": [],
    }
    if v.table is schemas.REPORT_COMPARISON:  # one fold per optimisation, its name in the fold's heading
        cols = [c for c in v.columns if c.key != "optimisation"]
        out["group_headers"] = [c.header for c in cols]
        by: dict[str, list[dict[str, Any]]] = {}
        for r in v.rows:
            by.setdefault(str(r.get("variant")), []).append(r)
        for variant, rows in by.items():
            sub = View(v.table, str(rows[0].get("optimisation") or variant), "", v.columns, list(rows))
            out["groups"].append(
                {
                    "title": f"{ctx.label(variant)}: {rows[0].get('optimisation') or variant}",
                    "summary": summary_line(sub),
                    "rows": [[Markup(_cell_html(r, c, ctx)) for c in cols] for r in rows],
                }
            )
    return out


def html_page(
    ctx: Context,
    views: Sequence[View],
    figures: Mapping[str, Mapping[str, Any]],
    decision_figures: Mapping[str, str] | None = None,
    tune: Mapping[str, str] | None = None,
) -> str:
    """The page: the decision first (one row per optimisation, how the evidence was checked, a small figure
    each), the deployments as commands, then every view folded with a one-line summary.

    ``decision_figures``: each optimisation's small figure as inline SVG (worthit.report.headline.figures);
    ``tune``: the study's tune, where one ran (worthit.tune.page.section), folded under the
    deployments."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=jinja2.select_autoescape(("html", "j2")),
        keep_trailing_newline=True,
    )
    ordered = sorted(views, key=lambda v: v.order)
    verdicts = next((v for v in ordered if v.table is schemas.REPORT_VERDICTS), None)
    rows, checks = decision_rows(ctx, verdicts)
    figs = decision_figures or {}
    small = [
        {"variant": r.variant, "title": r.optimisation, "effect": r.effect, "svg": Markup(figs[r.variant])}
        for r in rows
        if r.variant in figs
    ]
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
    prov = provenance(ctx)
    description = " ".join(str(ctx.study.cfg.get("description") or "").split())
    head, rest = description, ""  # a long description folds after its first words: the table comes first
    if len(description) > DESCRIPTION_SHOWN:
        head = description[:DESCRIPTION_SHOWN].rsplit(" ", 1)[0]
        rest = description[len(head) :].strip()
    return env.get_template("report.html.j2").render(
        study=ctx.study.name,
        description_head=head,
        description_rest=rest,
        baseline=ctx.baseline,
        # variants judged against a baseline of their own (variants.<v>.baseline): the header says so
        own_baselines=own_baselines(ctx),
        generated=time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        wording=WORDING,
        random=random,
        decision_headers=DECISION_HEADERS,
        decision=rows,
        checks=checks,
        rules=Markup(_md_inline(verdicts.caption)) if verdicts else "",
        small_figures=small,
        deployments=experiments.commands(ordered),  # the experiments' commands to copy, under the decision
        tune=None if tune is None else {**tune, "html": Markup(tune["html"])},
        views=[_view_dict(v, ctx) for v in ordered],
        logs=logs,
        figures=[
            {"name": n, "svg": Markup(inline_svg(Path(f["svg"]))), "caption": f["caption"]} for n, f in figures.items()
        ],
        provenance=yaml.safe_dump(prov, sort_keys=False, default_flow_style=False),
        provenance_line=", ".join(
            f"{k.replace('_', ' ')} {prov[k]}" for k in ("worthit_version", "vllm_version") if prov.get(k)
        )
        + (f"; {_hardware_line(prov.get('hardware'))}" if prov.get("hardware") else "")
        + (f"; {_machines_line(prov['machines'])}" if prov.get("machines") else ""),
        config=yaml.safe_dump(secrets.redact(dict(ctx.study.cfg)), sort_keys=False),  # docs/security.md
    )


def _machines_line(found: Sequence[Mapping[str, Any]]) -> str:
    return f"measured on {len(found)} machines: " + "; ".join(
        f"{m.get('gpu') or 'no GPU'} on {m['machine']} ({m['files']} file{'s' if m['files'] != 1 else ''})"
        for m in found
    )


def _hardware_line(hw: Any) -> str:
    if not isinstance(hw, Mapping):
        return str(hw)
    return ", ".join(str(hw[k]) for k in ("gpu", "cpu", "host") if hw.get(k)) or "hardware recorded"


def write_html(
    ctx: Context,
    views: Sequence[View],
    figures: Mapping[str, Mapping[str, Any]],
    out: str | Path,
    *,
    decision_figures: Mapping[str, str] | None = None,
    tune: Mapping[str, str] | None = None,
) -> Path:
    return atomic.write_text(out, html_page(ctx, views, figures, decision_figures, tune))
