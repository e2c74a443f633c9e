"""benchmarks/loadgen_fidelity/served.py: a run's own share of the server's Prometheus histograms, the truth
the two load generators are held against on a real vLLM server."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "loadgen_fidelity"))
spec = importlib.util.spec_from_file_location("loadgen_served", ROOT / "benchmarks/loadgen_fidelity/served.py")
assert spec and spec.loader
served = importlib.util.module_from_spec(spec)
spec.loader.exec_module(served)

# the shape vLLM's /metrics has: histograms with _bucket/_sum/_count per label set, counters, NaN gauges
BEFORE = """# HELP vllm:request_time_per_output_token_seconds Histogram of time_per_output_token_seconds per request.
# TYPE vllm:request_time_per_output_token_seconds histogram
vllm:request_time_per_output_token_seconds_bucket{engine="0",le="0.01",model_name="q"} 3.0
vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="q"} 0.006
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="q"} 3.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="q"} 0.09
vllm:time_to_first_token_seconds_count{engine="0",model_name="q"} 3.0
vllm:num_requests_running{engine="0",model_name="q"} 0.0
vllm:some_gauge_sum{engine="0"} NaN
python_gc_objects_collected_total{generation="0"} 1.0
"""
AFTER = """vllm:request_time_per_output_token_seconds_sum{engine="0",model_name="q"} 0.022
vllm:request_time_per_output_token_seconds_count{engine="0",model_name="q"} 11.0
vllm:request_time_per_output_token_seconds_sum{engine="1",model_name="q"} 0.004
vllm:request_time_per_output_token_seconds_count{engine="1",model_name="q"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="q"} 0.09
vllm:time_to_first_token_seconds_count{engine="0",model_name="q"} 3.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="q"} 2.5
vllm:inter_token_latency_seconds_count{engine="0",model_name="q"} 1000.0
"""


def test_a_runs_share_is_what_it_added_to_each_histogram_over_every_label_set() -> None:
    before, after = served.histograms(BEFORE), served.histograms(AFTER)
    assert before["vllm:request_time_per_output_token_seconds"] == [0.006, 3.0]
    assert "vllm:num_requests_running" not in before and "vllm:some_gauge" not in before
    assert after["vllm:request_time_per_output_token_seconds"] == pytest.approx([0.026, 13.0])
    share = served.run_share(before, after)
    # 10 requests added 0.020 s of per-request TPOT: 2.0 ms each
    assert share["vllm:request_time_per_output_token_seconds"]["count"] == pytest.approx(10.0)
    assert share["vllm:request_time_per_output_token_seconds"]["mean"] == pytest.approx(2.0)
    # a histogram the run left alone has no share; one that appeared has all of it
    assert "vllm:time_to_first_token_seconds" not in share
    assert share["vllm:inter_token_latency_seconds"]["mean"] == pytest.approx(2.5)


def test_every_arm_names_a_tool_and_what_it_sends() -> None:
    assert set(served.ARMS) == {"worthit", "worthit_bench_sampling", "bench", "bench_temp0"}
    tool, extra, temperature = served.ARMS["worthit_bench_sampling"]
    assert tool == "worthit" and extra == {"temperature": None, "repetition_penalty": 1.0} and temperature is None
    assert served.ARMS["bench_temp0"] == ("vllm_bench", {}, 0.0)


def test_measurements_of_one_set_up_merge_level_by_level_and_another_set_up_is_refused(tmp_path: Path) -> None:
    def run(arm: str, tpot: float) -> dict:
        return {"arm": arm, "client_mean_tpot_ms": tpot}

    base = {"serve": "vllm serve m", "prompt_tokens": 512, "output_tokens": 256, "arms": ["worthit", "bench"]}
    a = {**base, "levels": [{"concurrency": 16, "runs": [run("worthit", 2.0)]}, {"concurrency": 1, "runs": []}]}
    b = {
        **base,
        "levels": [{"concurrency": 256, "runs": [run("bench", 9.0)]}, {"concurrency": 16, "runs": [run("bench", 2.1)]}],
    }
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    m = served.merged([str(tmp_path / "a.json"), str(tmp_path / "b.json")])
    assert [lv["concurrency"] for lv in m["levels"]] == [1, 16, 256]
    assert [r["client_mean_tpot_ms"] for r in m["levels"][1]["runs"]] == [2.0, 2.1]
    (tmp_path / "c.json").write_text(json.dumps({**b, "output_tokens": 128}))
    with pytest.raises(SystemExit, match=r"c.json: output_tokens 128 differs from .*a.json's 256: not one set-up"):
        served.merged([str(tmp_path / "a.json"), str(tmp_path / "c.json")])


def test_a_runs_counters_are_summed_over_label_sets_and_only_the_watched_totals_count() -> None:
    """served.py reads the counters as every measurement does (worthit.prom), and keeps what a run added."""
    text = AFTER + (
        'vllm:prefix_cache_queries_total{engine="0",model_name="q"} 1024.0\n'
        'vllm:prefix_cache_queries_total{engine="1",model_name="q"} 512.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="q"} 496.0\n'
        "vllm:prefix_cache_hits_created 1.7e9\n"
    )
    c = served.prom.counters(text, served.prom.WATCHED_COUNTERS)
    assert c == {"vllm:prefix_cache_queries_total": 1536.0, "vllm:prefix_cache_hits_total": 496.0}
    run = {"server_counters": served.prometheus_delta({served.prom.PREEMPTIONS: 2.0}, {served.prom.PREEMPTIONS: 5.0})}
    assert served._preempted(run) == 3.0


def test_no_two_runs_of_a_measurement_send_the_same_prompts() -> None:
    """A tool's arms once shared their prompts, and vLLM's prefix cache answered the second from the first."""
    seeds = [
        served.run_seed(arm, conc=conc, rep=rep)
        for conc in (1, 4, 16, 64, 256)
        for rep in range(5)
        for arm in served.ARMS
    ]
    assert len(set(seeds)) == len(seeds)
    assert 99 not in seeds  # the per-level warm-up's seed


def test_the_report_shows_the_prompt_tokens_the_server_computed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def run(arm: str, computed: float, preempted: float | None) -> dict:
        server = {
            "vllm:request_time_per_output_token_seconds": {"count": 8, "mean": 2.0},
            "vllm:request_prefill_kv_computed_tokens": {"count": 8, "mean": computed},
        }
        r = {"arm": arm, "tpot_p50": 2.0, "client_mean_tpot_ms": 2.1, "client_mean_ttft_ms": 15.0, "server": server}
        if preempted is not None:
            r["server_counters"] = {served.prom.PREEMPTIONS: preempted}
        return r

    d = {
        "serve": "vllm serve m",
        "prompt_tokens": 512,
        "output_tokens": 256,
        "arms": ["worthit", "bench"],
        "levels": [{"concurrency": 1, "runs": [run("worthit", 512.0, 0.0), run("bench", 16.0, None)]}],
    }
    (tmp_path / "d.json").write_text(json.dumps(d))
    served.report(type("A", (), {"files": [str(tmp_path / "d.json")]})())
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 1 |")]
    assert rows[0].endswith("| 512 (512) | 0 (0) |") and "| 1.050 (1.050) |" in rows[0]
    assert rows[1].endswith("| 16 (16) | - |")


def test_the_report_compares_the_tools_only_where_both_ran_with_the_servers_ratio_beside() -> None:
    def run(arm: str, client: float, server: float) -> dict:
        return {
            "arm": arm,
            "client_mean_tpot_ms": client,
            "server": {"vllm:request_time_per_output_token_seconds": {"count": 8, "mean": server}},
        }

    slow = [run("worthit", c, c) for c in (2.0, 2.1, 2.2, 2.3)]
    fast = [run("bench_temp0", c, 1.0) for c in (1.0, 1.05, 1.1, 1.15)]
    alike = [run("bench", c, c) for c in (2.05, 2.15, 2.25, 1.95)]
    d = {"levels": [{"concurrency": 16, "runs": slow + fast + alike}, {"concurrency": 1, "runs": slow[:3]}]}
    rows = served.tool_rows(d)
    # worthit's arm against each vllm bench arm it pairs with; the level where vllm bench did not run has none
    assert len(rows) == 2 and all(r.startswith("| 16 |") for r in rows)
    greedy, defaults = rows
    assert "worthit / bench_temp0 | 4 / 4 |" in greedy and "| higher |" in greedy
    assert "x2.000 [" in greedy and greedy.endswith("x2.149 [x2.000, x2.300] |")  # the server: 2.0-2.3 over 1.0
    assert "| no difference shown |" in defaults  # 4 runs a side: the exact interval reaches 95 %, no coverage said
    assert "%" not in defaults
    three = served.tool_rows({"levels": [{"concurrency": 1, "runs": slow[:3] + fast[:3]}]})
    assert ", 90%]" in three[0]  # 3 runs a side cannot reach 95 %: the widest interval's coverage is said
