"""worthit tune: the space's flags checked against the real ``vllm serve --help=all`` of the serve env."""

from __future__ import annotations

from pathlib import Path

import pytest

from worthit.config import ConfigError
from worthit.tune import flags as F

pytestmark = pytest.mark.vllm


def test_the_installed_vllm_declares_its_flags(serve_python: Path, tmp_path: Path) -> None:
    version, accepted = F.accepted_flags(str(serve_python), tmp_path)
    assert version != "unknown" and (tmp_path / f"{version}.json").is_file()
    for flag in (
        "max-num-seqs",
        "max-num-batched-tokens",
        "gpu-memory-utilization",
        "enable-chunked-prefill",
        "no-enable-chunked-prefill",
        "speculative-config",
        "kv-cache-dtype",
    ):
        assert flag in accepted, flag
    assert len(accepted) > 100
    F.check_flags(["max-num-seqs", "speculative-config.num_speculative_tokens"], accepted, version=version)
    with pytest.raises(ConfigError, match=r"no flag --max-num-seq \(closest accepted: max-num-seqs"):
        F.check_flags(["max-num-seq"], accepted, version=version)
