"""worthit tune: the space's flags checked against vLLM's own --help=all (parsed, cached per version)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worthit import vllm_flags as V
from worthit.config import ConfigError
from worthit.tune import flags as F

HELP = """usage: vllm serve [model_tag] [options]

options:
  -h, --help            show this help message and exit
  --max-num-seqs MAX_NUM_SEQS
                        Maximum number of sequences per iteration. See --not-a-flag-line too.
  --enable-chunked-prefill, --no-enable-chunked-prefill
                        If True, prefill requests can be chunked.
  --speculative-config SPECULATIVE_CONFIG, -sc SPECULATIVE_CONFIG
                        Speculative decoding configuration.
  --gpu-memory-utilization GPU_MEMORY_UTILIZATION
      --indented-description-flag is not an option line
"""


def test_the_option_lines_are_parsed() -> None:
    assert F.parse_help(HELP) == {
        "max-num-seqs",
        "enable-chunked-prefill",
        "no-enable-chunked-prefill",
        "speculative-config",
        "gpu-memory-utilization",
    }


def test_an_unknown_flag_names_the_key_and_the_closest_accepted() -> None:
    accepted = F.parse_help(HELP)
    F.check_flags(["max-num-seqs", "speculative-config.num_speculative_tokens"], accepted, version="0.1")
    with pytest.raises(ConfigError) as e:
        F.check_flags(["max-num-seq"], accepted, version="0.1", source="s.yaml")
    assert (
        str(e.value)
        == "s.yaml: key 'tune.space.max-num-seq': vLLM 0.1 has no flag --max-num-seq (closest accepted: max-num-seqs)"
    )
    with pytest.raises(ConfigError, match=r"speculative-configs.k'.*closest accepted: speculative-config"):
        F.check_flags(["speculative-configs.k"], accepted, version="0.1")
    with pytest.raises(ConfigError, match=r"no flag --zzz \(see vllm serve --help=all\)"):
        F.check_flags(["zzz"], accepted, version="0.1")


def test_the_flags_are_cached_per_vllm_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(V, "vllm_version", lambda python: "9.9.9+cpu")
    monkeypatch.setattr(V, "help_text", lambda python: calls.append(python) or HELP)
    version, got = F.accepted_flags("/x/bin/python", tmp_path)
    assert version == "9.9.9+cpu" and "max-num-seqs" in got
    assert json.loads((tmp_path / "9.9.9+cpu.json").read_text())["vllm"] == "9.9.9+cpu"
    assert F.accepted_flags("/x/bin/python", tmp_path)[1] == got and calls == ["/x/bin/python"]  # asked once
    (tmp_path / "9.9.9+cpu.json").write_text("not json")  # a damaged cache is asked again
    assert F.accepted_flags("/x/bin/python", tmp_path)[1] == got and len(calls) == 2


def test_a_python_without_vllm_is_an_input_error_not_a_traceback(tmp_path: Path) -> None:
    with pytest.raises(F.FlagsUnavailable, match="could not run|exited"):
        F.help_text(str(tmp_path / "no-such-python"))


def test_engine_arguments_vllm_would_refuse_or_misread_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """The supervisor's check before a server starts: every flag as vLLM declares it, in full (its parser
    would take the abbreviation max-num-seq for max-num-seqs, which worthit would not read), and false only
    where the flag has a --no- form."""
    accepted = F.parse_help(HELP)
    fine = {
        "max_num_seqs": 8,
        "--enable-chunked-prefill": False,
        "speculative-config": {"method": "ngram"},
        "gpu-memory-utilization": None,
        "made-up": None,  # null: left out of the command line, nothing to check
    }
    assert V.problems(fine, accepted, version="0.1") == []
    assert V.problems({"max-num-seq": 8, "gpu-memory-utilization": False}, accepted, version="0.1") == [
        "engine argument 'max-num-seq': vLLM 0.1 has no flag --max-num-seq (closest accepted: max-num-seqs)",
        "engine argument 'gpu-memory-utilization: false': vLLM 0.1's --gpu-memory-utilization has no "
        "--no-gpu-memory-utilization form; write null to leave the flag out",
    ]
    monkeypatch.setenv(V.CACHE_ENV, "/somewhere")
    assert V.cache_dir() == Path("/somewhere/vllm-flags")
    monkeypatch.delenv(V.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert V.cache_dir() == Path("/xdg/worthit/vllm-flags")


def test_the_supervisor_asks_only_an_environment_that_holds_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A serve interpreter with no vLLM beside it (a stand-in server, a wrapper) is never run for its flags: it
    might not answer. One whose environment (or PYTHONPATH, as on the device machines) has vLLM's dist-info is."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    ran = tmp_path / "ran"
    python = venv / "bin" / "python"
    python.write_text(f"#!/bin/sh\ntouch {ran}\nsleep 300\n")
    python.chmod(0o755)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert V.installed_version(str(python)) is None and V.served_flags(str(python)) is None
    assert not ran.exists()
    site = tmp_path / "site"
    (site / "vllm-9.9.9+cpu.dist-info").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert V.installed_version(str(python)) == "9.9.9+cpu"
    monkeypatch.delenv("PYTHONPATH")
    (venv / "lib/python3.11/site-packages/vllm-0.25.0.dist-info").mkdir(parents=True)
    assert V.installed_version(str(python)) == "0.25.0"
    monkeypatch.setenv(V.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(V, "help_text", lambda python: HELP)
    assert V.served_flags(str(python)) == ("0.25.0", F.parse_help(HELP)) and not ran.exists()


def test_a_help_text_at_hand_is_kept_as_the_versions_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device warm-up runs vllm serve --help=all beside the model's conversion and keeps its flags, so the
    supervisor's check of the first server reads them from the cache instead of running vLLM again."""
    monkeypatch.setattr(V, "vllm_version", lambda python: "0.25.0")
    path = V.remember("python3", "warm-up 2026-12-05\n" + HELP, tmp_path)
    assert path == tmp_path / "0.25.0.json"
    monkeypatch.setattr(V, "help_text", lambda python: pytest.fail("asked vLLM although the flags were kept"))
    assert V.accepted_flags("python3", tmp_path) == ("0.25.0", F.parse_help(HELP))
    assert V.remember("python3", "no option lines", tmp_path / "other") is None
