"""The report's tables (worthit.report): each a view the report renders, every figure with its sample size
and 95% interval."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Field, Table, column


def _measure(name: str, what: str) -> tuple[Field, ...]:
    """A reported figure with its sample size and 95% interval (worthit.report)."""
    return (
        column(name, pa.float64(), what),
        column(
            f"{name}_n", pa.int32(), f"samples behind {name} (requests, items, or runs when interval_basis is runs)"
        ),
        column(f"{name}_ci95_low", pa.float64(), f"95% interval of {name}, low (equal to it for an exact count)"),
        column(f"{name}_ci95_high", pa.float64(), f"95% interval of {name}, high (equal to it for an exact count)"),
    )


_REPORT_STATUS = (
    column("status", pa.string(), "ok / failed / not_applicable", False),
    column("reason", pa.string(), "why it failed or does not apply"),
)
_INTERVAL_BASIS = column(
    "interval_basis",
    pa.string(),
    "what the 95% intervals rest on: 'N runs' (t-interval over independent runs of the level), 'single run' "
    "(order statistics or a bootstrap within one run), 'exact count', or why there is none",
)
# The figures a load level (and a deployment's promise, and its validation) is described by.
_LEVEL_MEASURES = (
    *_measure("ttft_ms_p50", "TTFT median"),
    *_measure("ttft_ms_p99", "TTFT 99th percentile"),
    *_measure("tpot_ms_p50", "TPOT median"),
    *_measure("tpot_ms_p99", "TPOT 99th percentile"),
    *_measure("output_tok_per_s", "output tokens/s"),
    *_measure("goodput_tok_per_s", "goodput tokens/s (requests meeting the interactive SLO)"),
)

REPORT_LEVELS = Table(
    "report_levels",
    "Report: per variant x load level, every figure with n and a 95% interval: over independent runs when the "
    "level was repeated (loadtest.repeats), else within its one run (order statistics for percentiles, a "
    "bootstrap over requests for rates), labelled by interval_basis.",
    (
        VARIANT,
        column("concurrency", pa.int32(), "closed-loop concurrency"),
        *_REPORT_STATUS,
        column("n", pa.int32(), "measured requests (all runs)"),
        column("n_errors", pa.int32(), "failed requests"),
        column("runs", pa.int32(), "independent runs of this level"),
        _INTERVAL_BASIS,
        *_LEVEL_MEASURES,
        column("runs_tpot_ms_p50_min", pa.float64(), "smallest TPOT P50 over runs (spread)"),
        column("runs_tpot_ms_p50_max", pa.float64(), "largest TPOT P50 over runs (spread)"),
        column("runs_output_tok_per_s_min", pa.float64(), "smallest output tok/s over runs (spread)"),
        column("runs_output_tok_per_s_max", pa.float64(), "largest output tok/s over runs (spread)"),
        column("meets_slo", pa.bool_(), "P99 TTFT and P99 TPOT within the interactive SLO (slo.ttft_ms, slo.tpot_ms)"),
        column(
            "under_throughput_tpot_ms",
            pa.bool_(),
            "P99 TPOT within the throughput-first ceiling (decide.throughput_tpot_ms)",
        ),
    ),
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
        *_measure("baseline_value", "the side without the optimisation"),
        *_measure("value", "the side with the optimisation"),
        column("change_pct", pa.float64(), "(with - without) / without x 100"),
        *_measure("improvement", "factor by which the optimisation is better (> 1) or worse (< 1)"),
        column("finding", pa.string(), "better / worse / no meaningful difference / undetermined / information"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_ACCURACY = Table(
    "report_accuracy",
    "Report: accuracy as a non-inferiority decision per variant x task: the change vs the baseline with its "
    "95% interval (paired over the documents both scored where lm-eval's samples exist, else the two "
    "standard errors combined), set against -decide.max_accuracy_drop_pt.",
    (
        VARIANT,
        column("baseline", pa.string(), "the variant compared with"),
        column("task", pa.string(), "lm-eval task"),
        column("metric", pa.string(), "the metric compared (acc_norm, acc, exact_match, ...)"),
        column("filter", pa.string(), "lm-eval filter"),
        column("baseline_value_pct", pa.float64(), "the baseline's score in %"),
        column("value_pct", pa.float64(), "the variant's score in %"),
        *_measure("delta_pt", "variant - baseline in percentage points"),
        column("delta_stderr_pt", pa.float64(), "standard error of delta_pt"),
        column("method", pa.string(), "paired (per-document differences) / unpaired (standard errors combined)"),
        column("bound_pt", pa.float64(), "the largest acceptable drop in points"),
        column("decision", pa.string(), "acceptable / unacceptable / inconclusive", False),
        column("items_needed", pa.int64(), "items that would decide an inconclusive task at the observed variance"),
        column("task_size", pa.int64(), "items the task has, where known"),
        column("note", pa.string(), "what the decision rests on, in words"),
        *_REPORT_STATUS,
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
        _INTERVAL_BASIS,
        column("status", pa.string(), "ok / failed / not_applicable / not run of the variant's results", False),
        column("role", pa.string(), "optimisation / control / helper (a draft model served alone for gamma)"),
        column("effect", pa.string(), "the figure that decided it, as measured, with its interval, in words"),
        column("accuracy_summary", pa.string(), "the worst task's change with its interval, and the decision"),
        column("why", pa.string(), "the reason in one line (at most 200 characters)"),
    ),
)

REPORT_CAPACITY = Table(
    "report_capacity",
    "Report: per variant, KV capacity set against the knees of the throughput and latency curves, and "
    "memory-bandwidth utilisation at the lowest level.",
    (
        VARIANT,
        column("weight_bytes", pa.int64(), "weight bytes read per decode step (as served)"),
        column("num_blocks", pa.int64(), "KV blocks (exact count)"),
        column("kv_cache_gib", pa.float64(), "KV capacity in GiB"),
        column("kv_critical_concurrency", pa.float64(), "KV tokens / tokens per request"),
        column(
            "throughput_knee_concurrency",
            pa.int32(),
            "lowest level reaching decide.knee.throughput_fraction of peak output tok/s",
        ),
        column(
            "latency_knee_concurrency",
            pa.int32(),
            "highest level whose TPOT P50 and TTFT P50 both stay within decide.knee.latency_factor x the "
            "lowest level's",
        ),
        column("highest_level", pa.int32(), "highest concurrency measured"),
        column("preemptions", pa.float64(), "vllm:num_preemptions_total over the load levels"),
        column("bound", pa.string(), "what limits concurrency"),
        column("tpot_ms_p50", pa.float64(), "TPOT P50 at the lowest level"),
        column("mbu_pct", pa.float64(), "(weight + KV bytes per step) / TPOT / peak bandwidth in %; null when unknown"),
        column("peak_bandwidth_gb_s", pa.float64(), "peak memory bandwidth used for MBU"),
        column("bandwidth_source", pa.string(), "datasheet or config the peak comes from"),
    ),
)

REPORT_CAPABILITY = Table(
    "report_capability",
    "Report: the capability boundary of this hardware + model (fastest TPOT, highest throughput, KV "
    "capacity, largest prefill saving).",
    (
        column("quantity", pa.string(), "the boundary", False),
        *_measure("value", "the best figure measured"),
        column("unit", pa.string(), "unit"),
        column("variant", pa.string(), "the variant reaching it"),
        _INTERVAL_BASIS,
        column("note", pa.string(), "setting and what bounds it"),
    ),
)

REPORT_PREFIX = Table(
    "report_prefix",
    "Report: prefix caching per variant x shared-prefix length: TTFT with the cache on and off, the change, "
    "and the prefix-cache hit rate in %.",
    (
        VARIANT,
        column("prefix_caching", pa.bool_(), "automatic prefix caching on in this variant"),
        column("prefix_tokens", pa.int32(), "shared prefix length"),
        *_measure("ttft_ms_p50", "TTFT median"),
        column("reference", pa.string(), "the variant with the cache the other way"),
        *_measure("reference_ttft_ms_p50", "its TTFT median at the same length"),
        column("change_pct", pa.float64(), "(this - reference) / reference x 100"),
        column("hit_rate_pct", pa.float64(), "prefix-cache hit tokens / queried tokens over the measured requests, %"),
        column("ttft_slope_ms_per_1k_tokens", pa.float64(), "least-squares slope of TTFT P50 vs prefix length"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_SWEET_SPOT = Table(
    "report_sweet_spot",
    "Report: the measured sweet spot per searched variant (sweet_spot.variants): the highest concurrency whose "
    "P99 TTFT and P99 TPOT meet the SLO, as a bracket [passes, fails) from the grid and the search's probes.",
    (
        VARIANT,
        column("outcome", pa.string(), "bracketed, probe_limit, all_pass (not reached), none_pass or no_grid"),
        column(
            "sweet_spot_concurrency", pa.int32(), "highest concurrency measured to meet the SLO below the first miss"
        ),
        column("first_miss_concurrency", pa.int32(), "lowest concurrency measured to miss it"),
        column("bracket_width", pa.int32(), "first miss - sweet spot (the search stops at sweet_spot.width)"),
        column("grid_levels", pa.int32(), "grid levels judged (run 1 of loadtest.levels)"),
        column("probes", pa.int32(), "levels the search measured between grid levels"),
        *_measure("ttft_ms_p99", "TTFT P99 at the sweet spot"),
        *_measure("tpot_ms_p99", "TPOT P99 at the sweet spot"),
        column("description", pa.string(), "the search's answer in words"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_TIMELINE = Table(
    "report_timeline",
    "Report: the server's timeline per variant x closed-loop level (loadtest.timeline_interval_s): the fullest "
    "KV usage, the most requests running and waiting, the preemptions during the measured requests, and "
    "whether they agree with the KV-derived critical concurrency (KV full and preemptions begin above it).",
    (
        VARIANT,
        column("level", pa.string(), "the load level (conc~16, chat/conc~4)"),
        column("concurrency", pa.int32(), "its closed-loop concurrency"),
        column("samples", pa.int32(), "scrapes during the measured requests (all runs)"),
        column("kv_usage_max_pct", pa.float64(), "fullest KV-cache usage sampled, %"),
        column("requests_running_max", pa.float64(), "most requests running at once"),
        column("requests_waiting_max", pa.float64(), "most requests waiting at once"),
        column("preemptions", pa.float64(), "preemptions during the measured requests (counter difference)"),
        column("kv_critical_concurrency", pa.float64(), "KV tokens / tokens per request (report_capacity)"),
        column("check", pa.string(), "agrees / disagrees with the critical concurrency, or why it was not checked"),
        column("note", pa.string(), "the variant's check: its verdict (worthit.loadgen.timeline.VERDICTS) and why"),
        *_REPORT_STATUS,
    ),
)

REPORT_SPECDEC = Table(
    "report_specdec",
    "Report: speculative decoding per variant x load level, from measurements only: the spec-decode counters "
    "(drafts, draft tokens, accepted), alpha and the acceptance rate, gamma, c at the level's concurrency, "
    "predicted S = alpha / (k gamma + c) and the measured TPOT speed-up with its interval.",
    (
        VARIANT,
        column("base_variant", pa.string(), "the target served without speculation"),
        column("method", pa.string(), "speculative method (ngram, draft_model, eagle, ...)"),
        column("k", pa.int32(), "draft tokens proposed per step"),
        column("concurrency", pa.int32(), "closed-loop concurrency"),
        column("drafts", pa.float64(), "speculative steps that proposed drafts (counter delta)"),
        column("draft_tokens", pa.float64(), "draft tokens proposed (counter delta)"),
        column("accepted_tokens", pa.float64(), "draft tokens accepted (counter delta)"),
        column("alpha", pa.float64(), "tokens per verify step = 1 + accepted / drafts; null when nothing was proposed"),
        column("acceptance_rate_pct", pa.float64(), "accepted / proposed draft tokens, %"),
        column("gamma", pa.float64(), "draft step cost / target step cost (0 for model-free drafting)"),
        column("c", pa.float64(), "verify step cost / plain decode step cost at this concurrency"),
        column("c_source", pa.string(), "how c was measured at this concurrency"),
        column("predicted_speedup", pa.float64(), "S = alpha / (k gamma + c)"),
        *_measure("measured_speedup", "base TPOT P50 / speculative TPOT P50"),
        column("rule", pa.string(), "predicted S against decide.min_predicted_speedup"),
        column("note", pa.string(), "what a missing number lacks"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
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

REPORT_DEPLOYMENTS = Table(
    "report_deployments",
    "Report: recommended deployments, one per scenario (latency-first: the SLO-feasible concurrency; "
    "throughput-first: the most output tok/s under the TPOT ceiling), each an exact `vllm serve` argv with "
    "the concurrency and the figures it promises. The validate_deployment stage (worthit.deploy) serves each "
    "argv as printed and loads it at that concurrency (results/<study>/deployment~<scenario>/load*.parquet).",
    (
        column("scenario", pa.string(), "latency / throughput", False),
        *_REPORT_STATUS,
        column("variant", pa.string(), "the variant deployed"),
        column("model", pa.string(), "the model as the config names it (hub id, or the path vLLM loads)"),
        column("model_source", pa.string(), "the config's model source"),
        column("argv", pa.list_(pa.string()), "the exact command, one argument per item"),
        column("command", pa.string(), "argv shell-quoted, to paste"),
        column("max_num_seqs", pa.int32(), "--max-num-seqs in argv"),
        column("concurrency", pa.int32(), "the concurrency the promise holds at (closed-loop requests in flight)"),
        column("chosen_by", pa.string(), "which measurement chose each flag"),
        column("slo_ttft_ms", pa.float64(), "P99 TTFT bound promised (latency scenario)"),
        column("slo_tpot_ms", pa.float64(), "P99 TPOT bound promised (TPOT ceiling in the throughput scenario)"),
        column("runs", pa.int32(), "independent runs behind the promise"),
        _INTERVAL_BASIS,
        *_LEVEL_MEASURES,
    ),
)

REPORT_VALIDATION = Table(
    "report_validation",
    "Report: each recommended deployment's promise against its validation runs (worthit.deploy), per figure; "
    "a miss is a measured value beyond the promised 95% interval on the worse side.",
    (
        column("scenario", pa.string(), "latency / throughput", False),
        column("variant", pa.string(), "the variant deployed"),
        column("quantity", pa.string(), "the figure", False),
        column("unit", pa.string(), "unit"),
        *_measure("promised", "the figure the report promised"),
        *_measure("measured", "the figure the validation run measured"),
        column("outcome", pa.string(), "met / miss / better than promised / not validated", False),
        *_REPORT_STATUS,
    ),
)


REPORT_TABLES = (
    REPORT_VERDICTS,
    REPORT_DEPLOYMENTS,
    REPORT_VALIDATION,
    REPORT_ACCURACY,
    REPORT_COMPARISON,
    REPORT_PREFIX,
    REPORT_SPECDEC,
    REPORT_SWEET_SPOT,
    REPORT_TIMELINE,
    REPORT_CAPABILITY,
    REPORT_CAPACITY,
    REPORT_LEVELS,
    REPORT_FAILURES,
)
