"""Speculative decoding judged from measurements only: the predicted speed-up S at each load level,
S = (f alpha + 1 - f) / (f (k gamma + c) + 1 - f), which is alpha / (k gamma + c) where every step drafts
(:func:`.model.predicted_speedup`).

- alpha (tokens per verify step), the acceptance rate, the draft counts and f (the share of decode steps that
  carried a draft: ngram proposes only where its n-gram occurred before) come from each level's
  spec-decode counter deltas. A drafter that never proposed leaves alpha unknown: the verdict at that level
  is inconclusive ("alpha unknown"), not a rejection.
- gamma: 0 for model-free drafting (ngram); else the draft model served alone (``specdec.draft_variants``),
  TPOT / the target's at the lowest level.
- c at concurrency N: the verify cost timed on the base variant at that concurrency (``specdec/verify``: a
  wave of N requests stepping over k + 1 new tokens each vs one, c(N) = 1 + (TTFT_N(k + 1) - TTFT_N(1)) /
  TPOT_base(N)), so the prediction falls off where the measurements do. Results timed at concurrency 1
  only: c(1) scaled by how the base's measured step time grows with the tokens in a step,
  c(N) = c(1) x [T(N (k + 1)) / T(N)] / [T(k + 1) / T(1)], T = the base's TPOT P50 against concurrency
  (interpolated on log concurrency, extrapolated linearly past the highest level); without any verify
  timing, c(N) = T(N (k + 1)) / T(N). The row says which.

The rule of thumb (``decide.min_predicted_speedup``): a predicted S below it rejects the level unless the
measured TPOT shows a benefit.

One row per (variant, workload, level): the study's grid levels (random-token prompts unless the variant names
a workload) and every named workload level of ``loadtest.workload_levels`` the variant was measured on (a chat, a
ShareGPT or a quoting workload), each against the base variant's level of the same name. The formulas are
:mod:`.model`'s; this analysis is the only place the specdec figures are computed (docs/results-tables.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt

from worthit import engine_args as eargs
from worthit import prom, schemas
from worthit.experiments.loadtest.report import Level, LoadAnalysis
from worthit.experiments.specdec.model import (
    MODEL_FREE_METHODS,
    acceptance_rate,
    alpha_of,
    c_at_concurrency,
    draft_coverage,
    gamma_from_tpot,
    implied_c,
    method_of,
    predicted_speedup,
    rule_of_thumb,
    verify_medians,
)
from worthit.experiments.specdec.section import base_variant, draft_variant, section
from worthit.experiments.specdec.tables import REPORT_SPECDEC, VERIFY
from worthit.report import plots
from worthit.report.context import Context, Pair
from worthit.report.data import Loaded
from worthit.report.decide import ALL_REGIMES, LATENCY, UNDETERMINED, WORSE, Check, Setting
from worthit.report.experiments import Change, EvidenceItem, Experiment, Figure, Helper
from worthit.report.measure import Measure, ratio
from worthit.report.outcomes import Finding
from worthit.report.plausibility import SpecPoint, speculative_model
from worthit.report.views import INT, MEASURE, NUM, PCT, TEXT, VARIANT, Column, View, measure_cols

NAME = "specdec"


RANDOM = "random"  # the workload of a level that names none: random-token prompts (loadtest.prompt_tokens)


@dataclass(frozen=True)
class SpecLevel:
    variant: str
    base: str
    method: str
    k: int
    concurrency: int
    drafts: float
    draft_tokens: float
    accepted: float
    alpha: float | None
    acceptance: float | None
    gamma: float | None
    c: float | None
    c_source: str
    predicted: float | None
    measured: Measure  # base TPOT P50 / speculative TPOT P50, at the same level of the same workload
    note: str
    workload: str = RANDOM  # the workload the level sent (a name of `workloads:`, or random)
    level: str = ""  # the level's name: conc~4 for the grid, chat/conc~4 for a named workload level
    draft_coverage: float | None = None  # draft steps / decode steps: how often the drafter proposed at all
    c_implied: float | None = None  # the c that would make the model match the measurement (a diagnostic)
    mostly_loops: bool | None = None  # the level's responses are mostly loops (None: not measured)
    repeated_ngram_share_p50: float | None = None  # its median response's share of repeated 4-grams
    ends_at_eos: bool | None = None  # the level's replies ended at EOS (None: not recorded)

    @property
    def setting(self) -> Setting:
        """Where the level sits in the verdict: its concurrency on the grid, its name for a workload level (the
        load comparisons' settings: worthit.experiments.loadtest.report)."""
        if self.level and "/" in self.level:
            return Setting(f"workload level {self.level}", "workload level")
        return Setting.concurrency(self.concurrency)


def workload_of(files: Sequence[Loaded]) -> str:
    """The workload a level's files sent: its name (the level's or the variant's), else random tokens."""
    for f in files:
        md = f.metadata
        name = md.get("workload_name") or md.get("level_workload") or (md.get("workload") or {}).get("name")
        if name:
            return str(name)
    return RANDOM


def step_time(levels: Sequence[Level], x: float) -> tuple[float | None, str]:
    """The base's TPOT P50 at x sequences in flight: interpolated on log concurrency between measured
    levels, linear past the highest (a compute-bound step grows with its tokens); (None, why) when unknown."""
    pts = [(lv.concurrency, lv.tpot_p50.value) for lv in levels if lv.ok and lv.tpot_p50.value]
    if not pts:
        return None, "no base TPOT"
    pts.sort()
    if x <= pts[0][0]:
        return pts[0][1], ""
    for (c0, t0), (c1, t1) in zip(pts, pts[1:], strict=False):
        if c0 <= x <= c1:
            f = (math.log(x) - math.log(c0)) / (math.log(c1) - math.log(c0))
            return t0 + f * (t1 - t0), ""
    if len(pts) < 2:
        return None, f"one base level ({pts[0][0]}): no step-time curve past it"
    (c0, t0), (c1, t1) = pts[-2], pts[-1]
    return max(t1, t1 + (x - c1) * (t1 - t0) / (c1 - c0)), f"extrapolated past concurrency {c1}"


def verify_timing(ctx: Context, base: str) -> tuple[dict[tuple[int, int], float | None], str]:
    """The verify timing's TTFT medians on the base variant by (concurrency, new tokens); ('', why) without."""
    files = ctx.results.variant(base).of(VERIFY.name)
    if not files:
        return {}, "no verify timing on the base variant"
    if not any(f.ok for f in files):
        return {}, f"verify timing {files[0].status}: {files[0].cause}"
    return verify_medians([r for f in files if f.ok for r in f.rows]), ""


def c_at(
    base_levels: Sequence[Level], k: int, n: int, medians: Mapping[tuple[int, int], float | None]
) -> tuple[float | None, str]:
    """c at concurrency n: timed there when the verify timing has n (:func:`.measure.c_at_concurrency`);
    else c at concurrency 1 scaled by the base's step-time growth (results timed at concurrency 1 only); else
    the step-time growth alone."""
    base_n = next((lv for lv in base_levels if lv.concurrency == n), None)
    timed = c_at_concurrency(medians, k, n, base_n.tpot_p50.value if base_n else None)
    if timed is not None:
        return timed, f"verify timing at concurrency {n}"
    t_n, why_n = step_time(base_levels, n)
    t_nk, why_nk = step_time(base_levels, n * (k + 1))
    if t_n is None or t_nk is None:
        return None, why_n or why_nk
    growth = t_nk / t_n
    extra = "; ".join(w for w in (why_n, why_nk) if w)
    t_1, _ = step_time(base_levels, 1)
    c1 = c_at_concurrency(medians, k, 1, t_1)
    if c1 is None:
        return growth, "base TPOT at N(k+1) / at N in flight" + (f" ({extra})" if extra else "")
    t_k1, _ = step_time(base_levels, k + 1)
    if t_1 is None or t_k1 is None:
        return c1, "verify timing at concurrency 1"
    return c1 * growth / (t_k1 / t_1), "verify timing at concurrency 1 x base step-time growth" + (
        f" ({extra})" if extra else ""
    )


def spec_variants(ctx: Context) -> list[str]:
    return [v for v in ctx.others if eargs.speculative_config(ctx.engine_args(v))]


def analyse(ctx: Context) -> dict[str, list[SpecLevel]]:
    load: LoadAnalysis = ctx.analyses["load"]
    out: dict[str, list[SpecLevel]] = {}
    cfg_base = section(ctx.study.cfg).base_variant
    timed = base_variant(ctx.study)  # where the workflow times verify steps
    for v in spec_variants(ctx):
        sc = eargs.speculative_config(ctx.engine_args(v)) or {}
        method, k = method_of(sc), int(sc.get("num_speculative_tokens") or 0)
        base = str(cfg_base or ctx.base_of(v))
        base_levels = load.ok(base)
        low = base_levels[0].tpot_p50.value if base_levels else None
        notes: list[str] = []
        gamma: float | None
        if method in MODEL_FREE_METHODS:
            gamma = 0.0
        else:
            draft = draft_variant(ctx.study, v) if ctx.configured(v) else None
            dl = load.ok(draft) if draft else []
            gamma = gamma_from_tpot(dl[0].tpot_p50.value, low) if dl else None
            if gamma is None:
                notes.append("gamma unknown: name the variant serving the draft model alone in specdec.draft_variants")
        medians, why_none = verify_timing(ctx, base)
        c_levels = base_levels
        if why_none and timed != base:  # a variant judged against a control: c from the study's base, whole
            medians, why_none = verify_timing(ctx, timed)
            if not why_none:
                c_levels = load.ok(timed)  # verify time and step time from one machine
                notes.append(f"c from {timed}'s verify timing ({base} has none)")
        if why_none:
            notes.append(f"c not timed ({why_none})")
        res = ctx.results.variant(v)
        grid = res.levels()
        named = res.workload_levels()
        # the grid's levels, then every named workload level, each against the base's level of the same name
        measured_levels: list[tuple[Level, Level | None, str, Sequence[Loaded]]] = [
            (lv, load.at(base, lv.concurrency), f"conc~{lv.concurrency}", grid.get(lv.concurrency, []))
            for lv in load.ok(v)
        ]
        for name, lv in sorted(load.workload_levels.get(v, {}).items()):
            if lv.ok:
                b = load.workload_levels.get(base, {}).get(name)
                measured_levels.append((lv, b if b is not None and b.ok else None, name, named.get(name, [])))
        out[v] = [
            _level_row(v, base, method, k, gamma, notes, lv, b, name, files, c_levels, medians)
            for lv, b, name, files in measured_levels
        ]
    return out


def _level_row(
    v: str,
    base: str,
    method: str,
    k: int,
    gamma: float | None,
    notes: Sequence[str],
    lv: Level,
    b: Level | None,
    name: str,
    files: Sequence[Loaded],
    c_levels: Sequence[Level],
    medians: Mapping[tuple[int, int], float | None],
) -> SpecLevel:
    """One (variant, workload, level) row: the level's counters, c at its concurrency, and its TPOT against the
    base's at the same level of the same workload."""
    d = lv.metrics_delta
    drafts, dtok, acc = (d.get(x, 0.0) for x in (prom.SPEC_DRAFTS, prom.SPEC_DRAFT_TOKENS, prom.SPEC_ACCEPTED_TOKENS))
    alpha = alpha_of(d)
    coverage = draft_coverage(d, lv.requests)
    c, src = c_at(c_levels, k, lv.concurrency, medians)
    measured = ratio(b.tpot_p50, lv.tpot_p50) if b else Measure(None, why_none=f"{base} has no level {name}")
    note = list(notes)
    if alpha is None:
        note.append("alpha unknown: the drafter proposed nothing at this level")
    loops = lv.mostly_loops  # the load level's own reading of its responses (experiments/loadtest/report.py)
    if loops and alpha is not None:
        note.append("responses mostly loops: the acceptance measures the drafter predicting the model's loops")
    predicted = predicted_speedup(alpha, k, gamma, c, coverage if coverage is not None else 1.0)
    # the report's own plausibility check, level by level: a measurement far from its model says what to check
    off = speculative_model([SpecPoint(name, predicted, measured)])
    if off is not None and predicted is not None and measured.value is not None:
        note.append(
            f"far from its own model (measured \u00d7{measured.value:.2f} against \u00d7{predicted:.2f} predicted): "
            f"check {off.what_to_check}"
        )
    return SpecLevel(
        v,
        base,
        method,
        k,
        lv.concurrency,
        drafts,
        dtok,
        acc,
        alpha,
        acceptance_rate(dtok, acc),
        gamma,
        c,
        src,
        predicted,
        measured,
        "; ".join(note),
        workload=workload_of(files),
        level=name,
        draft_coverage=coverage,
        c_implied=implied_c(
            alpha,
            k,
            gamma,
            lv.tpot_p50.value,
            tpot_base_ms=b.tpot_p50.value if b else None,
            coverage=coverage if coverage is not None else 1.0,
        ),
        mostly_loops=loops,
        repeated_ngram_share_p50=lv.repeated_ngram_share_p50,
        ends_at_eos=lv.ends_at_eos,
    )


def rule_check(
    where: Setting,
    drafts: float,
    alpha: float | None,
    k: int,
    *,
    gamma: float | None,
    c: float | None,
    threshold: float,
    coverage: float | None = None,
) -> Check | None:
    """What the speed-up model says at one level: alpha unknown (the drafter proposed nothing) settles it as
    inconclusive; a predicted S below the rule of thumb rejects unless a measurement shows a benefit.
    ``coverage``: the share of decode steps that drafted (None: every step, as a draft model does)."""
    if alpha is None:
        return Check(
            LATENCY,
            where,
            UNDETERMINED,
            f"alpha unknown: {drafts:,.0f} drafts at this level (the drafter never proposed)",
            settle="a workload on which the drafter proposes (for ngram: prompts whose text repeats)",
            decisive=True,
        )
    s = predicted_speedup(alpha, k, gamma, c, coverage if coverage is not None else 1.0)
    if s is not None and s < threshold:
        assert gamma is not None and c is not None
        return Check(
            LATENCY,
            where,
            WORSE,
            f"predicted speed-up S = {s:.2f}x is below the {threshold:g}x rule of thumb "
            f"(alpha {alpha:.2f}, k {k}, gamma {gamma:.2f}, c {c:.2f}"
            + (f", drafts at {coverage:.0%} of the steps" if coverage is not None and coverage < 1 else "")
            + ")",
            prediction=True,
        )
    return None


def evidence(ctx: Context, a: dict[str, list[SpecLevel]], pair: Pair) -> list[EvidenceItem]:
    th = ctx.rules.min_predicted_speedup
    levels = a.get(pair.variant, [])
    if levels and all(s.alpha is None for s in levels):  # speculation never happened: nothing here judges it
        return [
            Check(
                ALL_REGIMES,
                Setting("every level"),
                UNDETERMINED,
                f"alpha unknown: the drafter proposed nothing at any level ({sum(s.drafts for s in levels):,.0f} "
                "drafts), so these timings measure its overhead, not speculation",
                settle="a workload on which the drafter proposes (for ngram: prompts whose text repeats)",
                decisive=True,
            )
        ]
    checks = [
        rule_check(s.setting, s.drafts, s.alpha, s.k, gamma=s.gamma, c=s.c, threshold=th, coverage=s.draft_coverage)
        for s in levels
    ]
    return [c for c in checks if c is not None]


def views(ctx: Context, a: dict[str, list[SpecLevel]]) -> list[View]:
    th = ctx.rules.min_predicted_speedup
    rows = []
    for v, levels in a.items():
        for s in levels:
            rows.append(
                {
                    "variant": v,
                    "base_variant": s.base,
                    "method": s.method,
                    "k": s.k,
                    "workload": s.workload,
                    "level": s.level,
                    "concurrency": s.concurrency,
                    "drafts": s.drafts,
                    "draft_tokens": s.draft_tokens,
                    "accepted_tokens": s.accepted,
                    "alpha": s.alpha,
                    "acceptance_rate_pct": s.acceptance * 100 if s.acceptance is not None else None,
                    "draft_coverage_pct": s.draft_coverage * 100 if s.draft_coverage is not None else None,
                    "mostly_loops": s.mostly_loops,
                    "repeated_ngram_share_p50": s.repeated_ngram_share_p50,
                    "ends_at_eos": s.ends_at_eos,
                    "gamma": s.gamma,
                    "c": s.c,
                    "c_source": s.c_source,
                    "c_implied": s.c_implied,
                    "predicted_speedup": s.predicted,
                    **measure_cols("measured_speedup", s.measured),
                    "rule": rule_of_thumb(s.predicted, th),
                    "note": s.note or None,
                    "interval_basis": s.measured.basis or s.measured.why_none or None,
                    "status": schemas.STATUS_OK,
                }
            )
    cols = [
        Column("variant", "variant", VARIANT),
        Column("method", "method", TEXT),
        Column("k", "k", INT),
        Column("workload", "workload", TEXT),
        Column("level", "level", TEXT),
        Column("drafts", "drafts", NUM, 0),
        Column("draft_tokens", "draft tokens", NUM, 0),
        Column("accepted_tokens", "accepted", NUM, 0),
        Column("acceptance_rate_pct", "acceptance", PCT, 1),
        Column("draft_coverage_pct", "steps drafted", PCT, 1),
        Column("repeated_ngram_share_p50", "repeated 4-grams P50", NUM, 2),
        Column("mostly_loops", "mostly loops", TEXT),
        Column("ends_at_eos", "ends at EOS", TEXT),
        Column("alpha", "α", NUM, 2),
        Column("gamma", "γ", NUM, 2),
        Column("c", "c", NUM, 2),
        Column("predicted_speedup", "predicted S", NUM, 2),
        Column("measured_speedup", "measured speed-up (TPOT)", MEASURE, 2),
        Column("c_implied", "c implied", NUM, 2),
        Column("rule", "rule of thumb", TEXT),
        Column("c_source", "c from", TEXT),
        Column("note", "note", TEXT),
    ]
    caption = (
        "Speculative decoding from measurements only, one row per variant, workload and level (random: the "
        "random-token prompts of the grid; a name: that workload of workloads:). α = 1 + accepted / drafts from "
        "the level's counters; acceptance = accepted / proposed draft tokens; steps drafted = draft steps / decode "
        "steps (how often the drafter proposed at all; ngram proposes nothing without a match); γ from the draft "
        "model served alone (0 for ngram); c at the level's concurrency from the verify timing scaled by the base "
        "variant's measured step-time growth; predicted S = (fα + 1 − f) / (f(kγ + c) + 1 − f), f the steps drafted "
        "(α / (kγ + c) where every step drafts), next to the measured TPOT speed-up "
        "against the base's level of the same workload. Repeated 4-grams: the median response's share of 4-grams "
        "repeating an earlier one of it; mostly loops: that median is at least the loop share "
        "(worthit.loadgen.repetition), where an acceptance measures the drafter predicting the model's loops, not "
        "the traffic. Ends at EOS: the level's replies stopped where the model ended them (a real-text workload's "
        "default, as vllm bench serve's sharegpt), not forced on to max_tokens (ignore_eos), where a reply the "
        "model has finished runs on into loops. c implied: the c that would make S match the measurement "
        f"(a diagnostic, not an input). Predicted S below {th:g}x (decide.min_predicted_speedup): not worth "
        "trying. Counts and their ratios are exact (no interval); predicted S is the model of measured inputs (no "
        "interval); the measured speed-up carries its 95% interval."
    )
    return [View(REPORT_SPECDEC, "Speculative decoding", caption, cols, rows, order=50)]


def _figure(ctx: Context, a: dict[str, list[SpecLevel]]) -> Any:
    pts = [
        (f"{ctx.label(s.variant)} {s.workload} c={s.concurrency}", s.predicted, s.measured.value)
        for levels in a.values()
        for s in levels
        if s.predicted is not None and s.measured.value is not None
    ]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for label, p, m in pts:
        ax.scatter(p, m, label=label)
    hi = max(max(p or 0.0, m or 0.0) for _, p, m in pts) * 1.15
    ax.plot([0, hi], [0, hi], color="grey", lw=1, ls="--", label="measured = predicted")
    ax.axvline(ctx.rules.min_predicted_speedup, color="red", lw=1, ls=":", label="rule of thumb")
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xlabel("predicted speed-up S")
    ax.set_ylabel("measured speed-up (TPOT)")
    return plots.finish(fig, ax)


def change(a: Mapping[str, Any], b: Mapping[str, Any]) -> Change | None:
    """The pair's name when the variant's speculative config differs from its baseline's: its method and k, or
    "(off)" when the variant serves none; its effect depends on what is generated."""
    sa, sb = eargs.speculative_config(a), eargs.speculative_config(b)
    if sa == sb:
        return None
    sc = sb or sa or {}
    method = sc.get("method") or ("draft model" if sc.get("model") else "speculative")
    k = sc.get("num_speculative_tokens")
    name = f"speculative decoding ({method}{f', k={k}' if k else ''})" + ("" if sb else " (off)")
    return Change(name, content_dependent=True)


def helper(ctx: Context, variant: str) -> Helper | None:
    """A draft model served alone for γ (``specdec.draft_variants``): what it is for, and the γ it gave."""
    specs = [s for s, d in section(ctx.study.cfg).draft_variants.items() if d == variant]
    if not specs:
        return None
    levels = ctx.analyses.get(NAME) or {}
    gammas = [lv[0].gamma for s in specs if (lv := levels.get(s)) and lv[0].gamma is not None]
    got = f": \u03b3 = {gammas[0]:.2f} (its TPOT P50 / the target's at the lowest level)" if gammas else ""
    return Helper(
        f"the draft model of {', '.join(specs)}, served alone for gamma",
        f"{variant} serves the draft model of {', '.join(specs)} alone, to measure \u03b3{got}",
    )


def plausible(_ctx: Context, analysis: Any, pair: Pair) -> list[Finding | None]:
    """The speculative model's check on the variant's levels: the measured speed-up within half to twice its
    own predicted S (:func:`worthit.report.plausibility.speculative_model`)."""
    points = []
    for s in (analysis or {}).get(pair.variant) or []:
        gamma = f", gamma {s.gamma:.2f}" if s.gamma is not None else ""
        inputs = (
            f"alpha {s.alpha:.2f}, k {s.k}{gamma}, c {s.c:.2f}"
            if s.alpha is not None and s.c is not None
            else "inputs unknown"
        )
        label = (
            f"{s.workload} concurrency {s.concurrency}" if s.workload != "random" else f"concurrency {s.concurrency}"
        )
        points.append(SpecPoint(label, s.predicted, s.measured, inputs, s.c_implied))
    return [speculative_model(points)]


EXPERIMENT = Experiment(
    NAME,
    analyse,
    evidence=evidence,
    views=views,
    figures=(
        Figure(
            "specdec",
            "Speculative decoding: predicted S at each level (α / (kγ + c) where every step drafts) against the "
            "measured TPOT speed-up.",
            _figure,
        ),
    ),
    order=50,
    requires=("load",),
    change=change,
    flags=frozenset({eargs.SPECULATIVE_CONFIG}),
    helper=helper,
    findings=plausible,
)
