"""Engine arguments as ``vllm serve`` flags, read back by the serve env's own vLLM argument parser: what a
study config writes is what the server is given (a list flag's items, a JSON mapping, a boolean on or off)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from worthit.server import engine_flags

pytestmark = pytest.mark.vllm

PARSE = """
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
try:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
except ImportError:  # moved in later vLLM
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
ns = make_arg_parser(FlexibleArgumentParser()).parse_args(json.loads(sys.argv[1]))
print(json.dumps({k: getattr(ns, k) for k in json.loads(sys.argv[2])}, default=str))
"""


def test_vllms_parser_reads_lists_mappings_and_booleans_as_the_config_wrote_them(serve_python: Path) -> None:
    args = {
        "cudagraph_capture_sizes": [1, 2, 4],  # a list flag: one argument per item
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
        "enable-prefix-caching": True,
        "kv-cache-dtype-skip-layers": ["0", "27"],
        "max-num-seqs": 16,
        "enforce-eager": False,
        "enable-chunked-prefill": False,  # on by default in vLLM: off only with --no-enable-chunked-prefill
        "no-enable-prefix-caching": None,  # left out
    }
    flags = engine_flags(args)
    assert flags[:4] == ["--cudagraph-capture-sizes", "1", "2", "4"]
    dests = ["cudagraph_capture_sizes", "speculative_config", "enable_prefix_caching", "max_num_seqs"]
    dests += ["kv_cache_dtype_skip_layers", "enforce_eager", "enable_chunked_prefill"]
    proc = subprocess.run(
        [str(serve_python), "-c", PARSE, json.dumps(flags), json.dumps(dests)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["cudagraph_capture_sizes"] == [1, 2, 4]
    assert got["max_num_seqs"] == 16 and got["enable_prefix_caching"] is True
    assert got["kv_cache_dtype_skip_layers"] == ["0", "27"]
    assert got["enforce_eager"] is False and got["enable_chunked_prefill"] is False
    sc = got["speculative_config"]
    sc = json.loads(sc) if isinstance(sc, str) else sc
    assert sc["method"] == "ngram" and sc["num_speculative_tokens"] == 3
