"""The words of a verdict (:mod:`worthit.report.decide`): what its intervals rest on, what would settle an
inconclusive outcome, where an outcome holds over a range of settings, and why a regime came out as it
did."""

from __future__ import annotations

from collections.abc import Sequence

from worthit.report.evidence import Comparison, Setting
from worthit.report.measure import EXACT, SINGLE_RUN, Measure, basis_class, runs_in
from worthit.report.outcomes import ADOPT, REJECT, RegimeVerdict, SettingOutcome


def settle_performance(cs: Sequence[Comparison]) -> str:
    """What would settle comparisons that came out undetermined."""
    if any(c.improvement.single_run for c in cs):
        return "independent runs (loadtest.repeats: 3): the intervals are from a single run"
    if any(c.improvement.interval() is None and not c.improvement.is_exact for c in cs):
        return "more requests per level (loadtest.num_requests): a figure has no interval"
    return "more runs (loadtest.repeats): the interval spans the margin"


def comparisons_basis(cs: Sequence[Comparison]) -> str:
    """The weakest basis of the comparisons' intervals: a single run before runs, the fewest runs first."""
    bases = {c.improvement.basis for c in cs if c.improvement.value is not None}
    if SINGLE_RUN in bases:
        return SINGLE_RUN
    widened = sorted(b for b in bases if b.startswith(SINGLE_RUN))  # a single run with the pooled spread
    if widened:
        return widened[0]
    runs = [b for b in bases if runs_in(b)]
    if runs:
        return min(runs, key=lambda b: (runs_in(b) or 0, b))
    return EXACT if bases == {EXACT} else ""


def _span(xs: Sequence[float]) -> str:
    return f"{xs[0]:g}" if len(xs) == 1 else f"{xs[0]:g}-{xs[-1]:g}"


def verdict_basis(cs: Sequence[Comparison]) -> str:
    """What a verdict's intervals rest on: one basis ("3 runs", "3 runs, run-to-run spread pooled over 15
    cells (30 df)"), or where each holds when they differ ("2 runs (concurrency, workload level); single run
    (shared prefix)")."""
    pairs = [(c.improvement, c.setting.dimension or c.setting.label) for c in cs]
    known = [(m, w) for m, w in pairs if m.value is not None and m.basis]
    classes: dict[str, list[Measure]] = {}
    where: dict[str, dict[str, None]] = {}
    for m, w in known:
        if m.basis == EXACT:
            continue
        k = basis_class(m)
        classes.setdefault(k, []).append(m)
        where.setdefault(k, {})[w] = None
    if not classes:
        return EXACT if known else ""

    def text(k: str) -> str:
        pools = {m.pool for m in classes[k] if m.pool is not None}
        if not pools:
            return k
        cells = sorted({len(p.cells) for p in pools})
        dfs = sorted({p.df for p in pools})
        return f"{k} over {_span(cells)} cells ({_span(dfs)} df)"

    order = sorted(classes, key=lambda k: (k.startswith(SINGLE_RUN), k))
    if len(order) == 1:
        return text(order[0])
    return "; ".join(f"{text(k)} ({', '.join(where[k])})" for k in order)


def settle_single_run(setting: Setting) -> str:
    if setting.dimension == "shared prefix":  # the prefix sweep runs once: workload levels repeat
        return (
            "independent runs: a workload level with a shared prefix on both variants (workloads:, "
            "loadtest.repeats >= 2); the prefix sweep is a single run"
        )
    return "independent runs (loadtest.repeats >= 2): the intervals are from a single run"


def _val(o: SettingOutcome) -> str:
    return f"{o.setting.value:,g}" if o.setting.value is not None else o.setting.label


def _flip(o: SettingOutcome) -> str:
    """What decided one setting, without its place (said already): "TPOT P99 +38%"."""
    d = o.deciding
    where = f" at {o.setting.label}"
    return d[: -len(where)] if d.endswith(where) else d


def outcome_ranges(outs: Sequence[SettingOutcome]) -> str:
    """ "adopt up to concurrency 4, reject from 16" for one dimension; "adopt at 1, 4; reject at 16" otherwise.
    Where decided outcomes alternate (adopt, reject, adopt), each decided group inside names the figure that
    flips it: "reject at 64 (TPOT P99 +38%)"."""
    if not outs:
        return ""
    dim = outs[0].setting.dimension
    # an ordered dimension (concurrency, prefix length) reads as ranges; one without values (a workload level)
    # as a list of where
    if any(o.setting.value is None for o in outs):
        dim = ""
    runs: list[tuple[str, list[SettingOutcome]]] = []
    for o in outs:
        if runs and runs[-1][0] == o.label:
            runs[-1][1].append(o)
        else:
            runs.append((o.label, [o]))
    if len(runs) == 1:
        return f"{runs[0][0]} at every {dim} measured" if dim else f"{runs[0][0]}: {outs[0].reason}"
    decided = [i for i, (out, _) in enumerate(runs) if out in (ADOPT, REJECT)]

    def flips(i: int) -> bool:  # a decided group with the opposite decision on both sides of it
        out = runs[i][0]
        before = [runs[j][0] for j in decided if j < i]
        after = [runs[j][0] for j in decided if j > i]
        return bool(before and after) and out in (ADOPT, REJECT) and before[-1] != out and after[0] != out

    parts = []
    for i, (out, group) in enumerate(runs):
        why = f" ({_flip(group[0])})" if dim and flips(i) and group[0].deciding else ""
        if not dim:
            parts.append(f"{out} at " + ", ".join(o.setting.label for o in group))
        elif i == 0:
            parts.append(f"{out} up to {dim} {_val(group[-1])}")
        elif i == len(runs) - 1:
            parts.append(f"{out} from {_val(group[0])}")
        else:
            parts.append(f"{out} at {', '.join(_val(o) for o in group)}{why}")
    return ", ".join(parts)


def _and(vals: Sequence[str]) -> str:
    return vals[0] if len(vals) == 1 else ", ".join(vals[:-1]) + " and " + vals[-1]


def where_adopted(outs: Sequence[SettingOutcome], leaning: bool = False) -> str:
    """Where an outcome list adopts (``leaning``: leans to adopt), as one range of an ordered dimension: "up
    to concurrency 4", "from 1,500-token shared prefix", "at concurrency 4 to 64"; levels inside the range
    that could not be decided are named ("undecided at 16"). Where a level inside is rejected the data
    alternates: the adopted levels are listed with the figure that rejects the one between ("at concurrency
    16 and 256; rejected at 64 by TPOT P99 +38%")."""
    flags = [(o.leaning if leaning else o.outcome) == ADOPT for o in outs]
    dim = outs[0].setting.dimension if all(o.setting.value is not None for o in outs) else ""
    adopted = [o for o, f in zip(outs, flags, strict=True) if f]
    if not adopted:
        return ""
    if not dim:
        return "at " + ", ".join(o.setting.label for o in adopted)
    if all(flags):
        return f"at every {dim} measured"
    first, last = flags.index(True), len(flags) - 1 - flags[::-1].index(True)
    inside = outs[first : last + 1]
    refused = [(o.leaning if leaning else o.outcome) == REJECT for o in inside]
    rejected = [o for o, r in zip(inside, refused, strict=True) if r]
    open_ = [o for o, f, r in zip(inside, flags[first : last + 1], refused, strict=True) if not f and not r]
    if rejected:  # the data alternates: say where it holds and what flips it between
        flips = "; ".join(f"rejected at {_val(o)}" + (f": {_flip(o)}" if o.deciding else "") for o in rejected)
        return f"at {dim} {_and([_val(o) for o in adopted])}; {flips}"
    if first == 0:
        where = f"up to {dim} {_val(outs[last])}"
    elif last == len(outs) - 1:
        where = f"from {dim} {_val(outs[first])}"
    elif first == last:
        where = f"at {dim} {_val(outs[first])}"
    else:
        where = f"at {dim} {_val(outs[first])} to {_val(outs[last])}"
    if open_:
        where += f" (undecided at {_and([_val(o) for o in open_])})"
    return where


def regime_why(rv: RegimeVerdict) -> str:
    """Why a regime came out as it did: the reasons of the settings that carry its outcome (at most two)."""
    carrying = [o for o in rv.settings if o.outcome == rv.outcome] or list(rv.settings)
    carrying = [o for o in carrying if o.leaning] or carrying  # what a single run leans to, first
    if not carrying or not carrying[0].setting.dimension:
        return rv.detail.split(": ", 1)[-1] if rv.detail else ""
    return "; ".join(f"{o.setting.label}: {o.reason}" for o in carrying[:2])
