"""The report's own tables (worthit.report: the decision layer's verdicts, comparisons, capability boundary and
failures) and the columns every report table shares (a figure with its sample size and 95% interval); each
experiment's report tables are defined in its folder (``worthit.experiments.<name>.tables``)."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Field, Table, column


def measure_columns(name: str, what: str) -> tuple[Field, ...]:
    """A reported figure with its sample size and 95% interval (worthit.report)."""
    return (
        column(name, pa.float64(), what),
        column(
            f"{name}_n", pa.int32(), f"samples behind {name} (requests, items, or runs when interval_basis is runs)"
        ),
        column(f"{name}_ci95_low", pa.float64(), f"95% interval of {name}, low (equal to it for an exact count)"),
        column(f"{name}_ci95_high", pa.float64(), f"95% interval of {name}, high (equal to it for an exact count)"),
    )


REPORT_STATUS = (
    column("status", pa.string(), "ok / failed / not_applicable", False),
    column("reason", pa.string(), "why it failed or does not apply"),
)
INTERVAL_BASIS = column(
    "interval_basis",
    pa.string(),
    "what the 95% intervals rest on: 'N runs' (t-interval over independent runs of the level), 'single run' "
    "(order statistics or a bootstrap within one run), 'exact count', or why there is none",
)
# The figures a load level (and a deployment's promise, and its validation) is described by.
LEVEL_MEASURES = (
    *measure_columns("ttft_ms_p50", "TTFT median"),
    *measure_columns("ttft_ms_p99", "TTFT 99th percentile"),
    *measure_columns("tpot_ms_p50", "TPOT median"),
    *measure_columns("tpot_ms_p99", "TPOT 99th percentile"),
    *measure_columns("output_tok_per_s", "output tokens/s"),
    *measure_columns("goodput_tok_per_s", "goodput tokens/s (requests meeting the interactive SLO)"),
)

REPORT_COMPARISON = Table(
    "report_comparison",
    "Report: every figure the decision rules judge, baseline vs variant, with the improvement factor's 95% "
    "interval and what the rules found (better / worse / no meaningful difference / undetermined).",
    (
        VARIANT,
        column("baseline", pa.string(), "the variant it is compared with", False),
        column("optimisation", pa.string(), "the optimisation as the user turns it on"),
        column("regime", pa.string(), "latency (interactive) / throughput (batch) / capacity"),
        column("setting", pa.string(), "where it was measured: concurrency 4, 1500-token shared prefix, ..."),
        column("quantity", pa.string(), "what is compared (TPOT P50, TTFT P50, output tok/s, KV blocks, ...)", False),
        column("unit", pa.string(), "unit of the values"),
        *measure_columns("baseline_value", "the side without the optimisation"),
        *measure_columns("value", "the side with the optimisation"),
        column("change_pct", pa.float64(), "(with - without) / without x 100"),
        *measure_columns("improvement", "factor by which the optimisation is better (> 1) or worse (< 1)"),
        column("finding", pa.string(), "better / worse / no meaningful difference / undetermined / information"),
        INTERVAL_BASIS,
        *REPORT_STATUS,
    ),
)

REPORT_VERDICTS = Table(
    "report_verdicts",
    "Report: the decision table, one row per optimisation (a variant against the baseline), per regime: "
    "latency-first (interactive SLO) and throughput-first (output tok/s under a TPOT ceiling), with the "
    "accuracy decision, from the configurable `decide:` rules.",
    (
        VARIANT,
        column("baseline", pa.string(), "the variant it is compared with"),
        column(
            "optimisation", pa.string(), "the optimisation as the user turns it on, e.g. prefix caching (on vs off)"
        ),
        column("description", pa.string(), "the variant's description from the config"),
        column(
            "outcome",
            pa.string(),
            "adopt / reject / inconclusive / not applicable / failed / not run / control (it repeats its baseline)",
            False,
        ),
        column("condition", pa.string(), "where the outcome holds, e.g. latency-first, up to concurrency 4"),
        column("latency_outcome", pa.string(), "the latency-first outcome"),
        column("latency_detail", pa.string(), "per setting, e.g. adopt up to concurrency 4, reject from 16"),
        column("throughput_outcome", pa.string(), "the throughput-first outcome"),
        column("throughput_detail", pa.string(), "the best output tok/s under the TPOT ceiling, each side"),
        column("accuracy_outcome", pa.string(), "acceptable / unacceptable / inconclusive / not measured / not needed"),
        column("accuracy_detail", pa.string(), "the deciding task's change, interval and bound"),
        column("benefit", pa.string(), "benefits demonstrated"),
        column("accuracy_cost", pa.string(), "accuracy change range"),
        column("worst_accuracy_delta_pt", pa.float64(), "largest per-task accuracy drop in points (negative)"),
        column("effort", pa.string(), "effort label from decide.effort"),
        column("reason", pa.string(), "why, in words"),
        column("settle", pa.string(), "what would settle an inconclusive outcome"),
        INTERVAL_BASIS,
        column("status", pa.string(), "ok / failed / not_applicable / not run of the variant's results", False),
        column("role", pa.string(), "optimisation / control / helper (a draft model served alone for gamma)"),
        column("effect", pa.string(), "the figure that decided it, as measured, with its interval, in words"),
        column("accuracy_summary", pa.string(), "the worst task's change with its interval, and the decision"),
        column("why", pa.string(), "the reason in one line (at most 200 characters)"),
        column(
            "by_workload",
            pa.string(),
            "where it was measured on several workloads, the verdict on each alone in one line (the workloads it "
            "rests on first; random tokens shown beside a real-text verdict say so, and where the model loops)",
        ),
    ),
)

REPORT_CAPABILITY = Table(
    "report_capability",
    "Report: the capability boundary of this hardware + model (fastest TPOT, highest throughput, KV "
    "capacity, largest prefill saving).",
    (
        column("quantity", pa.string(), "the boundary", False),
        *measure_columns("value", "the best figure measured"),
        column("unit", pa.string(), "unit"),
        column("variant", pa.string(), "the variant reaching it"),
        INTERVAL_BASIS,
        column("note", pa.string(), "setting and what bounds it"),
    ),
)

REPORT_FAILURES = Table(
    "report_failures",
    "Report: every experiment that failed, does not apply, or was not run, with its reason (the root-cause "
    "line from the log where there is one).",
    (
        column("variant", pa.string(), "variant"),
        column("experiment", pa.string(), "the result, e.g. load/conc~4, kv, accuracy", False),
        column("status", pa.string(), "failed / not_applicable / not run", False),
        column("reason", pa.string(), "why"),
        column("log_tail", pa.string(), "the last lines of the log"),
    ),
)


# The report's own views, the decision layer's; each experiment's views are defined in its folder
# (worthit.experiments.<name>.tables) and registered with its tables (worthit.measurements).
REPORT_OWN_TABLES = (REPORT_VERDICTS, REPORT_COMPARISON, REPORT_CAPABILITY, REPORT_FAILURES)
