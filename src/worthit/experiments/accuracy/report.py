"""Accuracy as a non-inferiority decision, one task at a time, computed one way everywhere.

Per task the report compares one metric (acc_norm before acc before exact_match, named in every row) and
takes the change in points with its standard error from :func:`.summary.task_delta` (paired over
the documents both sides scored where lm-eval's per-document samples exist, else the two standard errors
combined): the same numbers and decision the accuracy summary shows. The decision
(:class:`worthit.report.decide.TaskAccuracy`, :func:`worthit.stats.noninferiority`) sets the 95% interval
against ``-max_accuracy_drop_pt``. A model whose manifest says its weights are random has no accuracy to
report: its rows are left out and its verdicts say so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt

from worthit import schemas, taskdata
from worthit.experiments.accuracy.summary import task_delta
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES, REPORT_ACCURACY
from worthit.report import plots
from worthit.report.context import Context, Pair
from worthit.report.decide import TaskAccuracy
from worthit.report.experiments import EvidenceItem, Experiment, Figure
from worthit.report.views import INT, MEASURE, NUM, OUTCOME, TEXT, VARIANT, Column, View, measure_cols
from worthit.stats import ACCEPTABLE, Z_95

NAME = "accuracy"
METRIC_PRIORITY = ("acc_norm", "acc", "exact_match", "em", "f1")
FILTER_PRIORITY = ("none", "strict-match", "flexible-extract")
# Documents in the split lm-eval evaluates, for the tasks the reference study uses (lm-eval 0.4 task YAMLs:
# hellaswag validation, arc test, gsm8k test). A task evaluated without a limit tells its size itself.
TASK_SIZES = {"hellaswag": 10042, "arc_easy": 2376, "arc_challenge": 1172, "gsm8k": 1319}


def accuracy_side(ctx: Context, variant: str, _seen: frozenset[str] = frozenset()) -> str:
    """Whose accuracy stands for ``variant``: its own, or, for a control that measured none, that of the
    configuration it repeats (accuracy belongs to the model and its flags, not to the machine's speed)."""
    control = variant not in _seen and variant != ctx.baseline and ctx.configured(variant)
    control = control and ctx.pair(variant).control
    if control and not any(f.ok for f in ctx.results.variant(variant).of(ACCURACY.name)):
        return accuracy_side(ctx, ctx.base_of(variant), _seen | {variant})
    return variant


@dataclass
class AccuracyAnalysis:
    scores: dict[str, dict[str, dict[str, Any]]]  # variant -> task -> the chosen metric's row
    samples: dict[str, dict[tuple[str, str, str], dict[int, float | None]]]  # variant -> key -> doc -> score
    failures: dict[str, str] = field(default_factory=dict)  # variant -> why its accuracy is missing
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> its config entry


def primary_scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One score per task: acc_norm before acc before exact_match; the unfiltered/strict filter first."""
    best: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
    for r in rows:
        if r.get("value") is None or (r.get("status") or schemas.STATUS_OK) != schemas.STATUS_OK:
            continue
        metric, _, filt = str(r.get("metric", "")).partition(",")
        filt = str(r.get("filter") or filt or "none")
        rank = (
            METRIC_PRIORITY.index(metric) if metric in METRIC_PRIORITY else len(METRIC_PRIORITY),
            FILTER_PRIORITY.index(filt) if filt in FILTER_PRIORITY else len(FILTER_PRIORITY),
        )
        task = str(r["task"])
        if task not in best or rank < best[task][0]:
            best[task] = (rank, {**r, "metric": metric, "filter": filt})
    return {t: row for t, (_, row) in sorted(best.items())}


def analyse(ctx: Context) -> AccuracyAnalysis:
    scores, samples, failures = {}, {}, {}
    for v in ctx.variants:
        res = ctx.results.variant(v)
        files = res.of(ACCURACY.name)
        rows = [r for f in files if f.ok for r in f.rows]
        scores[v] = primary_scores(rows)
        bad = [f.cause for f in files if not f.ok] + [
            f"{r.get('task')}: {r.get('reason')}" for r in rows if (r.get("status") or "ok") != schemas.STATUS_OK
        ]
        if bad:
            failures[v] = "accuracy failed: " + "; ".join(bad)
        per: dict[tuple[str, str, str], dict[int, float | None]] = {}
        for f in res.of(ACCURACY_SAMPLES.name):
            for r in f.rows if f.ok else []:
                per.setdefault((r["task"], r["metric"], r["filter"]), {})[int(r["doc_id"])] = r["value"]
        samples[v] = per
    tasks = {t["name"]: t for t in ((ctx.study.cfg.get("accuracy") or {}).get("tasks") or [])}
    return AccuracyAnalysis(scores, samples, failures, tasks)


def task_size(a: AccuracyAnalysis, task: str, n: int | None) -> int | None:
    """Items the task has: worthit's offline tasks know theirs; a task evaluated without a limit tells its own;
    the reference study's four from lm-eval's splits; None otherwise."""
    if task in taskdata.TASKS:
        return sum(taskdata.families(task).values())
    limit = (a.tasks.get(task) or {}).get("limit")
    if n and (limit is None or n < int(limit)) and task in a.tasks:
        return int(n)
    return TASK_SIZES.get(task)


def deltas(ctx: Context, a: AccuracyAnalysis, pair: Pair) -> list[TaskAccuracy]:
    """Each task both sides scored: the change (with - without) and its standard error, one way everywhere."""
    side_wo, side_w = accuracy_side(ctx, pair.without), accuracy_side(ctx, pair.with_)
    wo, w = a.scores.get(side_wo, {}), a.scores.get(side_w, {})
    out = []
    for task, row in w.items():
        if task not in wo:
            continue
        base = wo[task]
        if (base["metric"], base["filter"]) != (row["metric"], row["filter"]):
            continue
        key = (task, row["metric"], row["filter"])
        found = task_delta(a.samples.get(side_w, {}).get(key, {}), a.samples.get(side_wo, {}).get(key, {}), row, base)
        if found is None:
            continue
        d, se, n, method = found
        out.append(
            TaskAccuracy(
                task,
                row["metric"],
                float(base["value"]),
                float(row["value"]),
                float(d),
                se,
                int(n),
                method,
                ctx.rules.max_drop(task),
                task_size(a, task, row.get("n")),
                row["filter"],
            )
        )
    return out


def _random(ctx: Context, pair: Pair) -> bool:
    return ctx.random_weights(pair.with_) or ctx.random_weights(pair.without)


def evidence(ctx: Context, a: AccuracyAnalysis, pair: Pair) -> list[EvidenceItem]:
    return [] if _random(ctx, pair) else list(deltas(ctx, a, pair))


def views(ctx: Context, a: AccuracyAnalysis) -> list[View]:
    rows: list[dict[str, Any]] = []
    for v in ctx.others:
        pair = ctx.pair(v)
        if _random(ctx, pair):
            continue
        for t in deltas(ctx, a, pair):
            iv = t.interval
            rows.append(
                {
                    "variant": v,
                    "baseline": pair.base or ctx.baseline,
                    "task": t.task,
                    "metric": t.metric,
                    "filter": t.filter,
                    "baseline_value_pct": t.baseline_value * 100,
                    "value_pct": t.value * 100,
                    **measure_cols("delta_pt", t.delta),
                    "delta_stderr_pt": t.stderr_pt,
                    "method": t.method,
                    "bound_pt": t.bound_pt,
                    "decision": t.decision,
                    "items_needed": t.items_needed,
                    "task_size": t.task_size,
                    "note": (
                        f"95% interval [{iv[0]:+.1f}, {iv[1]:+.1f}] pt vs -{t.bound_pt:g} pt"
                        + (f"; {t.settle()}" if t.decision != ACCEPTABLE and t.settle() else "")
                        if iv
                        else "no standard error"
                    )
                    + (" (with/without swapped: the variant turns it off)" if pair.inverted else ""),
                    "status": schemas.STATUS_OK,
                    "interval_basis": f"{t.method}, {t.n} items",
                }
            )
    cols = [
        Column("variant", "variant", VARIANT),
        Column("task", "task", TEXT),
        Column("metric", "metric", TEXT),
        Column("baseline_value_pct", "baseline %", NUM),
        Column("value_pct", "variant %", NUM),
        Column("delta_pt", "Δ pt (95% interval)", MEASURE),
        Column("bound_pt", "bound pt", NUM),
        Column("decision", "decision", OUTCOME),
        Column("items_needed", "items to decide", INT),
        Column("task_size", "task size", INT),
        Column("note", "note", TEXT),
    ]
    caption = (
        "Accuracy as a non-inferiority decision: acceptable when the 95% interval of the change lies above "
        "-decide.max_accuracy_drop_pt, unacceptable when it lies below, otherwise inconclusive with the items "
        f"that would decide it at the observed variance (z = {Z_95}). Paired over the documents both variants "
        "scored where lm-eval's samples exist; the two standard errors combined otherwise. Models with random "
        "weights are left out."
    )
    return [View(REPORT_ACCURACY, "Accuracy (non-inferiority)", caption, cols, rows, order=20)]


def _figure(ctx: Context, a: AccuracyAnalysis) -> Any:
    have = {v: s for v, s in a.scores.items() if s and not ctx.random_weights(v)}
    if not have:
        return None
    tasks = sorted({t for s in have.values() for t in s})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(tasks) * len(have) ** 0.5), 4.2))
    width = 0.8 / len(have)
    for i, (v, scores) in enumerate(have.items()):
        xs = [j + i * width for j, t in enumerate(tasks) if t in scores]
        ys = [float(scores[t]["value"]) * 100 for t in tasks if t in scores]
        es = [Z_95 * float(scores[t].get("stderr") or 0) * 100 for t in tasks if t in scores]
        ax.bar(xs, ys, width, yerr=es, capsize=3, label=v)
    ax.set_xticks(
        [j + 0.4 - width / 2 for j in range(len(tasks))],
        [f"{t}\n({next(iter(have.values())).get(t, {}).get('metric', '')})" for t in tasks],
    )
    ax.set_ylabel("accuracy (%)")
    return plots.finish(fig, ax, grid="y")


def notes(ctx: Context, a: AccuracyAnalysis, pair: Pair) -> list[str]:
    sides = [(v, accuracy_side(ctx, v)) for v in (pair.without, pair.with_)]
    fails = [a.failures[s] for _, s in sides if s in a.failures]
    stands = [
        f"the accuracy of {s} stands for {v}, a control that repeats its configuration"
        for v, s in sides
        if s != v and deltas(ctx, a, pair)
    ]
    return fails + stands


def asks_accuracy(ctx: Context, variant: str) -> bool:
    """The variant's config runs accuracy, or its accuracy ran (a lossless optimisation's check reads it)."""
    return variant in ctx.study.variants_with(NAME) or bool(ctx.results.variant(variant).of(ACCURACY.name))


def why_no_accuracy(ctx: Context, pair: Pair) -> tuple[str, str]:
    """(why, what would settle it) when no task's accuracy compares the two sides: a side whose accuracy
    failed, one that has not measured it yet though its config asks for it, or one whose config does not."""
    whys, settles = [], []
    for v in (accuracy_side(ctx, pair.without), accuracy_side(ctx, pair.with_)):
        files = ctx.results.variant(v).of(ACCURACY.name)
        failed = [f for f in files if not f.ok]
        if any(f.ok for f in files):
            continue
        if failed:
            whys.append(f"the accuracy run of {v} {failed[0].status}: {failed[0].cause}")
            settles.append(f"fix what broke the accuracy run of {v} and run it again")
        elif v in ctx.study.variants_with(NAME):
            whys.append(f"the accuracy of {v} is configured but not measured yet")
            settles.append(f"run the workflow on, to measure the accuracy of {v}")
        else:
            whys.append(f"{v} runs no accuracy experiment")
            settles.append(f"accuracy on {v} (variants.{v}.experiments: [{NAME}])")
    if not whys:
        return "the two sides measured no accuracy task in common", "the same accuracy tasks on both variants"
    return "; ".join(whys), "; ".join(settles)


def failures(ctx: Context, variant: str) -> list[dict[str, Any]]:
    """A failed task in an ok accuracy file: a row of the failures table each."""
    rows: list[dict[str, Any]] = []
    for f in ctx.results.variant(variant).of(ACCURACY.name):
        for r in f.rows:
            if r.get("status") not in (None, schemas.STATUS_OK):
                rows.append(
                    {
                        "variant": variant,
                        "experiment": f"{NAME}/{r.get('task')}",
                        "status": r["status"],
                        "reason": r.get("reason"),
                    }
                )
    return rows


def provenance(ctx: Context) -> dict[str, Any]:
    """The lm-eval version its results were measured with (the page's provenance)."""
    version = next(
        (
            r.get("lm_eval_version")
            for f in ctx.results.all_files()
            if f.table == ACCURACY.name
            for r in f.rows
            if r.get("lm_eval_version")
        ),
        None,
    )
    return {"lm_eval_version": version}


EXPERIMENT = Experiment(
    NAME,
    analyse,
    evidence=evidence,
    views=views,
    figures=(
        Figure(
            "accuracy",
            "Accuracy per task and variant (the metric under each task); bars are 95% intervals from lm-eval's "
            "standard error. Models with random weights are left out.",
            _figure,
        ),
    ),
    notes=notes,
    order=30,
    asks_accuracy=asks_accuracy,
    why_no_accuracy=why_no_accuracy,
    verdict_columns=(Column("accuracy_outcome", "accuracy", OUTCOME),),  # the verdict's accuracy outcome
    failures=failures,
    provenance=provenance,
)
