"""The load test: per variant and concurrency, latency percentiles and token rates with n and a 95% interval.

A level measured in several independent runs (``loadtest.repeats``) gets a Student t interval over the
runs' figures: run-to-run variation is in it. Its spread is the one pooled over every repeated level of the
study that shares its machine and kind of figure (:mod:`worthit.report.pooling`), so two runs stand on many
degrees of freedom, not one. A level measured once gets the interval its one run can give (order statistics
for percentiles, a bootstrap over requests for rates), labelled "single run"; its comparisons carry the
pooled run-to-run spread on top, where the study has one.

It feeds the decision layer per common level: the wait a user has, the end-to-end time of the median
request (E2E P50, measured per request: the workload's requests are the same on both sides), judged; TTFT
and TPOT at P50 and P99 beside it (shown; one demonstrably worse beyond the harm tolerance,
``decide.max_harm_pct`` and ``decide.max_harm_ms``, counts against it, else it is a trade-off) and output
tok/s (shown); whether the SLO at P99 that holds without it still holds with it (a check; a P99 whose
interval straddles the bound keeps a benefit from adopting); and, for the throughput-first regime, each
side's most output tok/s among the levels whose P99 TPOT stays under the ceiling (docs/verdicts.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from worthit import schemas
from worthit.experiments.loadtest.tables import REPORT_LEVELS
from worthit.loadgen.repetition import level_repetition
from worthit.loadgen.workloads import real_text
from worthit.metrics import Slo, summarize
from worthit.report import plots
from worthit.report.context import Context, Pair
from worthit.report.data import Loaded, VariantResults
from worthit.report.decide import (
    BETTER,
    INFO,
    LATENCY,
    THROUGHPUT,
    UNDETERMINED,
    WORSE,
    Check,
    Comparison,
    Setting,
    Workload,
)
from worthit.report.experiments import EvidenceItem, Experiment, Figure
from worthit.report.measure import SINGLE_RUN, Measure, bootstrap_rate, pooled_over_runs, quantile, runs_basis
from worthit.report.pooling import Cell, Pools, files_machine, pool_group, pools_of
from worthit.report.views import INT, MEASURE, TEXT, VARIANT, Column, View, measure_cols

NAME = "load"


# The kinds of figure a level has (Level's fields), each pooled over runs (worthit.report.pooling, whose
# QUANTITY_KIND names them as the comparisons do).
KINDS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50", "output_tok_per_s", "goodput_tok_per_s")


@dataclass(frozen=True)
class Level:
    variant: str
    concurrency: int
    status: str
    reason: str
    n: int = 0
    n_errors: int = 0
    runs: int = 0
    ttft_p50: Measure = Measure(None)
    ttft_p99: Measure = Measure(None)
    tpot_p50: Measure = Measure(None)
    tpot_p99: Measure = Measure(None)
    e2e_p50: Measure = Measure(None)
    output_tok_per_s: Measure = Measure(None)
    goodput_tok_per_s: Measure = Measure(None)
    spread_tpot_p50: tuple[float, float] | None = None
    spread_output_tok_per_s: tuple[float, float] | None = None
    metrics_delta: dict[str, float] = field(default_factory=dict)  # summed over the runs
    requests: int = 0  # the requests metrics_delta counts over the runs (measured; warm-up too in older files)
    machine: str | None = None  # the one machine of its runs (None: several, or not recorded)
    mostly_loops: bool | None = None  # its responses are mostly loops (None: responses' repetition not recorded)
    repeated_ngram_share_p50: float | None = None  # its median response's share of repeated 4-grams
    # its replies end at the model's end-of-sequence (a real-text workload's default: output lengths vary, as
    # vllm bench serve's sharegpt); False: every request generated its max_tokens (ignore_eos); None: not recorded
    ends_at_eos: bool | None = None

    @property
    def ok(self) -> bool:
        return self.status == schemas.STATUS_OK and self.n > self.n_errors

    @property
    def basis(self) -> str:
        return runs_basis(self.runs) if self.runs > 1 else SINGLE_RUN

    def meets(self, slo: Slo) -> bool | None:
        """P99 TTFT and P99 TPOT within the SLO (None: no SLO set): :meth:`worthit.metrics.Slo.level_met`."""
        return slo.level_met(self.ttft_p99.value, self.tpot_p99.value)

    def within(self, tpot_ceiling_ms: float | None) -> bool:
        return tpot_ceiling_ms is None or (self.tpot_p99.value is not None and self.tpot_p99.value <= tpot_ceiling_ms)


def _spread(values: Sequence[float | None]) -> tuple[float, float] | None:
    vals = [v for v in values if v is not None]
    return (min(vals), max(vals)) if vals else None


def per_run(files: Sequence[Loaded], slo: Slo) -> dict[str, tuple[float, ...]]:
    """Each figure of a level, one value per independent run (the runs that succeeded)."""
    good = [f for f in files if f.ok]
    if len(good) < 2:
        return {}
    per = [summarize(f.rows, slo) for f in good]
    got = {
        "ttft_p50": [s.ttft_ms.p50 for s in per],
        "ttft_p99": [s.ttft_ms.p99 for s in per],
        "tpot_p50": [s.tpot_ms.p50 for s in per],
        "tpot_p99": [s.tpot_ms.p99 for s in per],
        "e2e_p50": [s.e2e_ms.p50 for s in per],
        "output_tok_per_s": [s.output_tok_per_s for s in per],
        "goodput_tok_per_s": [s.goodput_tok_per_s for s in per],
    }
    return {k: tuple(float(v) for v in vals if v is not None) for k, vals in got.items()}


def level(
    variant: str,
    concurrency: int,
    files: Sequence[Loaded],
    slo: Slo,
    *,
    pools: Pools | None = None,
    cell: str = "",
    runs: Mapping[str, tuple[float, ...]] | None = None,
    workload: str | None = None,
) -> Level:
    """One level from its result files; ``pools``: the study's pooled run-to-run spread (its intervals then
    rest on it, ``cell`` naming this level in the pool); ``runs``: its per-run figures when already computed;
    ``workload``: the named workload of the level, if any (:func:`worthit.report.pooling.pool_group`)."""
    good = [f for f in files if f.ok]
    if not good:
        return Level(variant, concurrency, files[0].status, files[0].cause)
    records = [r for f in good for r in f.rows]
    ok = [r for r in records if r.get("success")]
    delta: dict[str, float] = {}
    for f in good:
        for k, val in (f.metadata.get("metrics_delta") or {}).items():
            delta[k] = delta.get(k, 0.0) + float(val)
    # the requests the counters counted: the measured ones, and the warm-up where the counters were read
    # before it (levels measured before metrics_after_warmup was recorded)
    requests = sum(
        len(f.rows) + (0 if f.metadata.get("metrics_after_warmup") else int(f.metadata.get("n_warmup") or 0))
        for f in good
    )
    where = files_machine(good)
    ends_at_eos = _ends_at_eos(good)
    rep = level_repetition([r.get("repeated_ngram_share") for r in ok])
    common: dict[str, Any] = {"n": len(records), "n_errors": len(records) - len(ok), "runs": len(good)}
    figs: dict[str, Any]
    spread: dict[str, Any]
    if len(good) > 1:
        got = runs if runs is not None else per_run(good, slo)
        n = len(records)
        pool = pools or Pools()
        group = pool_group(where, workload, ends_at_eos)
        figs = {k: pooled_over_runs(got.get(k, ()), n, pool.get(group, k), cell) for k in KINDS}
        spread = {
            "spread_tpot_p50": _spread(list(got.get("tpot_p50", ()))),
            "spread_output_tok_per_s": _spread(list(got.get("output_tok_per_s", ()))),
        }
    else:
        s = summarize(records, slo)
        tokens = [float(r.get("output_tokens") or 0) for r in ok]
        good_tokens = [float(r.get("output_tokens") or 0) if slo.met(r) else 0.0 for r in ok]
        lat = [float(r.get("e2e_ms") or 0) / 1e3 for r in ok]
        figs = {
            "ttft_p50": quantile([r.get("ttft_ms") for r in ok], 0.5),
            "ttft_p99": quantile([r.get("ttft_ms") for r in ok], 0.99),
            "tpot_p50": quantile([r.get("tpot_ms") for r in ok], 0.5),
            "tpot_p99": quantile([r.get("tpot_ms") for r in ok], 0.99),
            "e2e_p50": quantile([r.get("e2e_ms") for r in ok], 0.5),
            "output_tok_per_s": bootstrap_rate(tokens, lat, s.output_tok_per_s),
            "goodput_tok_per_s": bootstrap_rate(good_tokens, lat, s.goodput_tok_per_s),
        }
        spread = {}
    return Level(
        variant,
        concurrency,
        schemas.STATUS_OK,
        "",
        **common,
        **figs,
        **spread,
        metrics_delta=delta,
        requests=requests,
        machine=where,
        mostly_loops=rep.mostly_loops if rep.n else None,
        repeated_ngram_share_p50=rep.repeated_ngram_share_p50,
        ends_at_eos=ends_at_eos,
    )


def levels_of(v: VariantResults, slo: Slo, pools: Pools | None = None) -> list[Level]:
    return [level(v.name, c, files, slo, pools=pools, cell=f"{v.name}/conc~{c}") for c, files in v.levels().items()]


@dataclass
class LoadAnalysis:
    levels: dict[str, list[Level]]
    # variant -> closed-loop levels of a named workload (chat/conc~4 -> its Level), compared where both sides have one
    workload_levels: dict[str, dict[str, Level]] = field(default_factory=dict)
    pools: Pools = field(default_factory=Pools)  # the run-to-run spread pooled over the repeated levels

    def ok(self, variant: str) -> list[Level]:
        return sorted((lv for lv in self.levels.get(variant, []) if lv.ok), key=lambda lv: lv.concurrency)

    def at(self, variant: str, concurrency: int) -> Level | None:
        return next((lv for lv in self.ok(variant) if lv.concurrency == concurrency), None)

    def best_within(self, variant: str, tpot_ceiling_ms: float | None) -> Level | None:
        """The level with the most output tok/s whose P99 TPOT stays under the ceiling."""
        cands = [lv for lv in self.ok(variant) if lv.within(tpot_ceiling_ms) and lv.output_tok_per_s.value]
        return max(cands, key=lambda lv: lv.output_tok_per_s.value or 0.0) if cands else None


def _ends_at_eos(files: Sequence[Loaded]) -> bool | None:
    """Whether a level's measured runs let replies end at EOS (``ignore_eos`` false in their metadata); None
    where they do not say or disagree."""
    eos = {f.metadata.get("ignore_eos") for f in files if f.ok} - {None}
    return (not eos.pop()) if len(eos) == 1 else None


def analyse(ctx: Context) -> LoadAnalysis:
    """Every level of every variant; first the per-run figures of the repeated ones, pooled by machine and
    kind of figure, then each level's measures on that pool."""
    cells: dict[str, tuple[str, int, list[Loaded]]] = {}  # cell name -> (variant, concurrency, files)
    named: dict[str, dict[str, str]] = {}  # variant -> workload level -> cell name
    workload_of: dict[str, str] = {}  # cell name -> the named workload of its level (none for the grid's)
    for v in ctx.variants:
        res = ctx.results.variant(v)
        for c, files in res.levels().items():
            cells[f"{v}/conc~{c}"] = (v, c, files)
        for name, files in res.workload_levels().items():
            cells[f"{v}/{name}"] = (v, int(files[0].metadata.get("concurrency") or 0), files)
            named.setdefault(v, {})[name] = f"{v}/{name}"
            workload_of[f"{v}/{name}"] = str(files[0].metadata["level_workload"])
    runs = {key: per_run(files, ctx.slo) for key, (_, _, files) in cells.items()}
    oks = {key: [f for f in files if f.ok] for key, (_, _, files) in cells.items()}
    group = {key: pool_group(files_machine(ok), workload_of.get(key), _ends_at_eos(ok)) for key, ok in oks.items()}
    pools = pools_of(Cell(group[key], kind, key, vals) for key in cells for kind, vals in runs[key].items())

    def lv(key: str) -> Level:
        v, c, files = cells[key]
        return level(v, c, files, ctx.slo, pools=pools, cell=key, runs=runs[key], workload=workload_of.get(key))

    grid = {v: [lv(f"{v}/conc~{c}") for c in ctx.results.variant(v).levels()] for v in ctx.variants}
    return LoadAnalysis(grid, {v: {n: lv(k) for n, k in ws.items()} for v, ws in named.items()}, pools)


def _slo_text(ctx: Context) -> str:
    s = ctx.slo
    parts = [
        f"TTFT P99 <= {s.ttft_ms:,g} ms" if s.ttft_ms is not None else "",
        f"TPOT P99 <= {s.tpot_ms:,g} ms" if s.tpot_ms is not None else "",
    ]
    return ", ".join(p for p in parts if p)


def ceiling_text(ceiling: float | None) -> str:
    """How the throughput-first bound reads: "under TPOT P99 <= 100 ms", or that none is set."""
    return (
        f"under TPOT P99 <= {ceiling:,g} ms"
        if ceiling is not None
        else "(no TPOT ceiling set: decide.throughput_tpot_ms)"
    )


def _with_pool(a: LoadAnalysis, b: Level, v: Level, items: list[EvidenceItem]) -> list[EvidenceItem]:
    """The comparisons of two levels, each given the pooled run-to-run spread of its kind of figure on their
    machine: it widens a comparison that rests on a single run (decide.Comparison.run_spread)."""
    if b.runs > 1 and v.runs > 1:
        return items
    out: list[EvidenceItem] = []
    for c in items:
        if isinstance(c, Comparison):
            pool = a.pools.for_quantity(b.machine, c.quantity) or a.pools.for_quantity(v.machine, c.quantity)
            c = replace(c, run_spread=pool)
        out.append(c)
    return out


def _latency_figures(b: Level, v: Level, s: Setting, *, guards_p99: bool) -> list[EvidenceItem]:
    """One level's figures: E2E P50 judged (the median request's whole wait); TTFT and TPOT P50 (and, at a
    concurrency level, their P99s) shown beside it, counting against it only as harms (docs/verdicts.md);
    output tok/s shown for the throughput-first regime."""
    out: list[EvidenceItem] = [
        Comparison("E2E P50", "ms", b.e2e_p50, v.e2e_p50, False, LATENCY, s),
        Comparison("TTFT P50", "ms", b.ttft_p50, v.ttft_p50, False, LATENCY, s, judged=False, guard=True),
        Comparison("TPOT P50", "ms", b.tpot_p50, v.tpot_p50, False, LATENCY, s, judged=False, guard=True),
    ]
    if guards_p99:
        out += [
            Comparison("TTFT P99", "ms", b.ttft_p99, v.ttft_p99, False, LATENCY, s, judged=False, guard=True),
            Comparison("TPOT P99", "ms", b.tpot_p99, v.tpot_p99, False, LATENCY, s, judged=False, guard=True),
        ]
    out.append(
        Comparison("output tok/s", "tok/s", b.output_tok_per_s, v.output_tok_per_s, True, THROUGHPUT, s, judged=False)
    )
    return out


def _over(m: Measure, bound: float) -> tuple[bool, bool]:
    """(over the bound by its value, demonstrably: its whole interval) of one P99."""
    if m.value is None:
        return True, True
    iv = m.interval()
    return m.value > bound, (iv[0] > bound) if iv is not None else m.value > bound


def _slo_check(ctx: Context, b: Level, v: Level, s: Setting) -> Check | None:
    """Whether the SLO at P99 that holds without the optimisation still holds with it: broken (the with side's
    P99 demonstrably over a bound: it rejects), perhaps broken (over by its value only: a benefit waits), met
    only with it (the without side demonstrably over), or held on both sides (said beside a trade-off)."""
    slo = ctx.slo
    mb, mv = b.meets(slo), v.meets(slo)
    if mb is None:
        return None
    text = _slo_text(ctx)
    bounds = [("TTFT P99", slo.ttft_ms, b.ttft_p99, v.ttft_p99), ("TPOT P99", slo.tpot_ms, b.tpot_p99, v.tpot_p99)]
    bounds = [x for x in bounds if x[1] is not None and not (x[0] == "TPOT P99" and x[3].value is None)]
    if mb and mv:
        return Check(LATENCY, s, INFO, f"the SLO ({text}) holds with and without it")
    if mb and not mv:
        over = [(q, bd, m) for q, bd, _, m in bounds if bd is not None and _over(m, bd)[0]]
        shown = "; ".join(f"{q} {m.text(1, ' ms')}" for q, _, m in over)
        if any(bd is not None and _over(m, bd)[1] for _, bd, m in over):
            return Check(LATENCY, s, WORSE, f"breaks the SLO ({text}) that is met without it: {shown}")
        return Check(
            LATENCY,
            s,
            UNDETERMINED,
            f"may break the SLO ({text}) that is met without it: {shown}, the interval straddles the bound",
            "more runs (loadtest.repeats): a P99 sits on the SLO bound",
            blocks_adoption=True,
        )
    if not mb and mv:
        before = [(q, m) for q, bd, m, _ in bounds if bd is not None and _over(m, bd)[1]]
        if before:
            shown = "; ".join(f"{q} {m.text(1, ' ms')} without" for q, m in before)
            return Check(LATENCY, s, BETTER, f"meets the SLO ({text}) where it is not met without it: {shown}")
    return None


def _loops(*levels: Level | None) -> bool | None:
    """Whether either side's responses at a level are mostly loops (None: recorded on neither)."""
    seen = [lv.mostly_loops for lv in levels if lv is not None and lv.mostly_loops is not None]
    return any(seen) if seen else None


def workload(ctx: Context, variant: str, name: str | None, loops: bool | None = None) -> Workload:
    """What a level of ``variant`` sent: the named workload (a workload level's, else the variant's or the
    study's ``loadtest.workload``), real text or not as its kind says; the grid's random tokens without one."""
    cfg = ctx.study.cfg
    if name is None and ctx.configured(variant):
        name = (cfg.get("variants") or {}).get(variant, {}).get("workload") or (cfg.get("loadtest") or {}).get(
            "workload"
        )
    if not name:
        return Workload("random tokens", False, loops)
    kind = ((cfg.get("workloads") or {}).get(name) or {}).get("kind")
    return Workload(str(name), real_text(kind), loops)


def evidence(ctx: Context, a: LoadAnalysis, pair: Pair) -> list[EvidenceItem]:
    out: list[EvidenceItem] = []
    wo, w = pair.without, pair.with_
    common = sorted({lv.concurrency for lv in a.ok(wo)} & {lv.concurrency for lv in a.ok(w)})
    for c in common:
        b, v = a.at(wo, c), a.at(w, c)
        assert b is not None and v is not None
        s = Setting.concurrency(c, workload(ctx, w, None, _loops(b, v)))
        out += _with_pool(a, b, v, _latency_figures(b, v, s, guards_p99=True))
        out += [x for x in [_slo_check(ctx, b, v, s)] if x is not None]
    # levels of a named workload both sides measured (a conversation level: realistic prefix reuse)
    for name in sorted(a.workload_levels.get(wo, {}).keys() & a.workload_levels.get(w, {}).keys()):
        b, v = a.workload_levels[wo][name], a.workload_levels[w][name]
        if not (b.ok and v.ok):
            continue
        sent = workload(ctx, w, name.split("/")[0], _loops(b, v))
        s = Setting(f"workload level {name}", "workload level", workload=sent)
        out += _with_pool(a, b, v, _latency_figures(b, v, s, guards_p99=False))
    ceiling = ctx.rules.throughput_tpot_ms
    bb, bv = a.best_within(wo, ceiling), a.best_within(w, ceiling)
    where = Setting(
        f"best level {ceiling_text(ceiling)}" if ceiling is not None else "best level",
        workload=workload(ctx, w, None, _loops(*a.ok(wo), *a.ok(w))),
    )
    if a.ok(wo) and a.ok(w):
        if bb and bv:
            out.append(
                Comparison(
                    f"most output tok/s (c={bv.concurrency} with, c={bb.concurrency} without)",
                    "tok/s",
                    bb.output_tok_per_s,
                    bv.output_tok_per_s,
                    True,
                    THROUGHPUT,
                    where,
                )
            )
        elif bb or bv:
            good = bv is not None
            out.append(
                Check(
                    THROUGHPUT,
                    where,
                    BETTER if good else WORSE,
                    ("only with it" if good else "only without it") + f" does a level stay {ceiling_text(ceiling)}",
                )
            )
    return out


def _row(lv: Level, ctx: Context) -> dict[str, Any]:
    sp, st = lv.spread_tpot_p50, lv.spread_output_tok_per_s
    return {
        "variant": lv.variant,
        "concurrency": lv.concurrency,
        "status": lv.status,
        "reason": lv.reason or None,
        "n": lv.n,
        "n_errors": lv.n_errors,
        "runs": lv.runs,
        "interval_basis": lv.basis if lv.ok else None,
        **measure_cols("ttft_ms_p50", lv.ttft_p50),
        **measure_cols("ttft_ms_p99", lv.ttft_p99),
        **measure_cols("tpot_ms_p50", lv.tpot_p50),
        **measure_cols("tpot_ms_p99", lv.tpot_p99),
        **measure_cols("output_tok_per_s", lv.output_tok_per_s),
        **measure_cols("goodput_tok_per_s", lv.goodput_tok_per_s),
        "runs_tpot_ms_p50_min": sp[0] if sp else None,
        "runs_tpot_ms_p50_max": sp[1] if sp else None,
        "runs_output_tok_per_s_min": st[0] if st else None,
        "runs_output_tok_per_s_max": st[1] if st else None,
        "meets_slo": lv.meets(ctx.slo) if lv.ok else None,
        "under_throughput_tpot_ms": lv.within(ctx.rules.throughput_tpot_ms) if lv.ok else None,
    }


def views(ctx: Context, a: LoadAnalysis) -> list[View]:
    rows = [_row(lv, ctx) for v in ctx.variants for lv in a.levels.get(v, [])]
    cols = [
        Column("variant", "variant", VARIANT),
        Column("concurrency", "conc", INT),
        Column("n", "n", INT),
        Column("n_errors", "errors", INT),
        Column("ttft_ms_p50", "TTFT P50 ms", MEASURE),
        Column("ttft_ms_p99", "TTFT P99 ms", MEASURE),
        Column("tpot_ms_p50", "TPOT P50 ms", MEASURE),
        Column("tpot_ms_p99", "TPOT P99 ms", MEASURE),
        Column("output_tok_per_s", "output tok/s", MEASURE),
        Column("goodput_tok_per_s", "goodput tok/s", MEASURE),
        Column("meets_slo", "meets SLO", TEXT),
        Column("status", "status", TEXT),
        Column("reason", "reason", TEXT),
    ]
    caption = (
        "Every load level with n and a 95% interval. Intervals over independent runs where the level was "
        "repeated (loadtest.repeats); within one run otherwise, labelled single run: run-to-run variation is "
        f"not in those. SLO: {_slo_text(ctx) or 'none set'}."
    )
    return [View(REPORT_LEVELS, "Load levels (n and 95% intervals)", caption, cols, rows, order=90)]


def capability(ctx: Context, a: LoadAnalysis) -> list[dict[str, Any]]:
    ok = [lv for v in ctx.variants for lv in a.ok(v)]
    rows: list[dict[str, Any]] = []
    if not ok:
        return rows
    lowest = min(lv.concurrency for lv in ok)
    fast = [lv for lv in ok if lv.concurrency == lowest and lv.tpot_p50.value is not None]
    if fast:
        lv = min(fast, key=lambda x: x.tpot_p50.value or 0.0)
        rows.append(
            {
                "quantity": "fastest TPOT P50 (lowest concurrency)",
                **measure_cols("value", lv.tpot_p50),
                "unit": "ms",
                "variant": lv.variant,
                "interval_basis": lv.basis,
                "note": f"concurrency {lv.concurrency}",
            }
        )
    tp = [lv for lv in ok if lv.output_tok_per_s.value is not None]
    if tp:
        lv = max(tp, key=lambda x: x.output_tok_per_s.value or 0.0)
        rows.append(
            {
                "quantity": "highest output throughput",
                **measure_cols("value", lv.output_tok_per_s),
                "unit": "tok/s",
                "variant": lv.variant,
                "interval_basis": lv.basis,
                "note": f"concurrency {lv.concurrency}",
            }
        )
    return rows


def _latency_figure(ctx: Context, a: LoadAnalysis) -> Any:
    series = {ctx.label(v): a.ok(v) for v in ctx.variants if a.ok(v)}
    if not series:
        return None
    return plots.latency(series)


def _throughput_figure(ctx: Context, a: LoadAnalysis) -> Any:
    series = {ctx.label(v): a.ok(v) for v in ctx.variants if a.ok(v)}
    if not series:
        return None
    return plots.throughput(series)


EXPERIMENT = Experiment(
    NAME,
    analyse,
    evidence=evidence,
    views=views,
    figures=(
        Figure("latency", "TPOT and TTFT against concurrency per variant: P50 line, band up to P99.", _latency_figure),
        Figure(
            "throughput",
            "Output tokens/s and goodput under the SLO against concurrency; bars are 95% intervals.",
            _throughput_figure,
        ),
    ),
    capability=capability,
    order=10,
)
