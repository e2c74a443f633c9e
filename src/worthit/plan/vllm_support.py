"""What the serve environment's vLLM itself says it supports, asked once per plan through its public interfaces.

The prerequisite rules (:mod:`worthit.plan.prerequisites`) are pure functions of a variant and its hardware; a
few of them need facts only the installed vLLM knows: the least compute capability its FP8 weight method
accepts (``Fp8Config.get_min_capability()``) and the activation dtypes it runs with
(``get_supported_act_dtypes()``), whether its build has the kernel that quantises activations for them
(``torch.ops._C.static_scaled_fp8_quant``: vLLM's CPU build registers a stub without arguments), the KV
offloading backends ``--kv-offloading-backend`` takes
(``KVOffloadingBackend``), which platform it was built for, and whether the optional packages two methods
import are there: ``arctic_inference`` for suffix decoding (vLLM's ``has_arctic_inference()``) and ``lmcache``
for LMCache offloading. :func:`ask` runs a short script in that environment's Python (importing vLLM there
takes ~10 s on a CPU) and returns None when it cannot (no vLLM, another layout): the rules then say what they
could not check. Standard library only.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ASK_TIMEOUT_S = 180

# Run in the serve environment: every fact through vLLM's own interfaces, each one optional (None when this
# vLLM has no such interface), printed as one JSON line after a marker (vLLM logs to stdout too).
_SCRIPT = r"""
import importlib.util, json, typing
out = {}
try:
    import vllm
    out["version"] = vllm.__version__
except Exception as e:
    print("WORTHIT-VLLM-SUPPORT " + json.dumps({"error": f"{type(e).__name__}: {e}"}))
    raise SystemExit(0)
try:
    from vllm.platforms import current_platform
    out["device"] = str(current_platform.device_type or "")
except Exception:
    out["device"] = None
try:
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config
    out["fp8_min_capability"] = int(Fp8Config.get_min_capability())
    out["fp8_act_dtypes"] = [str(d).removeprefix("torch.") for d in Fp8Config.get_supported_act_dtypes()]
except Exception:
    out["fp8_min_capability"] = out["fp8_act_dtypes"] = None
try:  # the kernel that quantises activations for FP8 weights: a build without it registers a stub of no arguments
    import torch
    current_platform.import_kernels()
    op = torch.ops._C.static_scaled_fp8_quant.default
    out["fp8_quant_kernel"] = len(op._schema.arguments) > 0
except Exception:
    out["fp8_quant_kernel"] = None
try:
    from vllm.config.cache import KVOffloadingBackend
    out["offloading_backends"] = list(typing.get_args(KVOffloadingBackend))
except Exception:
    out["offloading_backends"] = None
try:
    from vllm.utils.import_utils import has_arctic_inference
    out["arctic_inference"] = bool(has_arctic_inference())
except Exception:
    out["arctic_inference"] = importlib.util.find_spec("arctic_inference") is not None
out["lmcache"] = importlib.util.find_spec("lmcache") is not None
print("WORTHIT-VLLM-SUPPORT " + json.dumps(out))
"""
_MARK = "WORTHIT-VLLM-SUPPORT "


@dataclass(frozen=True)
class VllmSupport:
    """The serve environment's vLLM as it describes itself (None: that vLLM did not say)."""

    version: str
    device: str | None = None  # "cpu", "cuda", ... (vLLM's current_platform.device_type)
    fp8_min_capability: int | None = None  # 75 means sm_75
    fp8_act_dtypes: tuple[str, ...] | None = None  # ("bfloat16", "float16")
    fp8_quant_kernel: bool | None = None  # its _C.static_scaled_fp8_quant takes arguments (is not a stub)
    offloading_backends: tuple[str, ...] | None = None  # ("native", "lmcache")
    arctic_inference: bool | None = None  # suffix decoding's package importable
    lmcache: bool | None = None  # LMCache's package importable

    @classmethod
    def from_mapping(cls, d: Mapping[str, Any]) -> VllmSupport:
        def tup(key: str) -> tuple[str, ...] | None:
            v = d.get(key)
            return tuple(str(x) for x in v) if isinstance(v, list) else None

        def opt_bool(key: str) -> bool | None:
            v = d.get(key)
            return bool(v) if v is not None else None

        cap = d.get("fp8_min_capability")
        return cls(
            version=str(d.get("version") or "unknown"),
            device=str(d["device"]) if d.get("device") else None,
            fp8_min_capability=int(cap) if cap is not None else None,
            fp8_act_dtypes=tup("fp8_act_dtypes"),
            fp8_quant_kernel=opt_bool("fp8_quant_kernel"),
            offloading_backends=tup("offloading_backends"),
            arctic_inference=opt_bool("arctic_inference"),
            lmcache=opt_bool("lmcache"),
        )

    @property
    def cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def where(self) -> str:
        return f"the serve env's vLLM {self.version}" + (f" ({self.device})" if self.device else "")


def parse(stdout: str) -> VllmSupport | None:
    """The facts :data:`_SCRIPT` printed (its marked line), None when it printed none or an error."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(_MARK):
            try:
                d = json.loads(line[len(_MARK) :])
            except ValueError:
                return None
            return VllmSupport.from_mapping(d) if isinstance(d, dict) and "error" not in d else None
    return None


def ask(python: str, timeout_s: float = ASK_TIMEOUT_S) -> VllmSupport | None:
    """Ask the vLLM installed for ``python`` (``envs.serve_python``); None when it cannot be asked."""
    try:
        done = subprocess.run([python, "-c", _SCRIPT], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return parse(done.stdout)
