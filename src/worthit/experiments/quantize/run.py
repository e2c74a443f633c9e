"""The stage (:func:`quantize`): validate the plan, run its backend into a staging folder, gate the
checkpoint, write the manifest. Bad input raises; everything else is a recorded result."""

from __future__ import annotations

import logging
import os
import shutil
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from worthit.experiments.quantize.backends import llmcompressor_awq_architectures, run_autoawq, run_llmcompressor
from worthit.experiments.quantize.checks import validate_plan
from worthit.experiments.quantize.gate import GateResult, quality_gate
from worthit.experiments.quantize.manifest import (
    STATUS_FAILED,
    STATUS_NOT_AVAILABLE,
    STATUS_OK,
    model_bytes,
    peak_rss_bytes,
    write_result_manifest,
)
from worthit.experiments.quantize.spec import AUTOAWQ_ARCHITECTURES, GROUPED_SCHEMES, NotAvailable, QuantizePlan
from worthit.models import Manifest

log = logging.getLogger("worthit.experiments.quantize")


def quantize(plan: QuantizePlan, base_manifest: Path, out_dir: Path) -> Manifest:
    """Validate, quantise, gate, write the manifest. Bad input raises :class:`QuantizeError`; a backend
    that is not installed, a crash of the backend or a failed gate are recorded in the manifest."""
    base = Manifest.load(base_manifest)
    base_dir = Path(base.model_dir)
    validate_plan(plan, base_dir)
    if plan.method == "awq":
        validate_plan(plan, base_dir, llmcompressor_awq_architectures())
    elif plan.method == "autoawq":
        validate_plan(plan, base_dir, AUTOAWQ_ARCHITECTURES)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = out_dir / "model"
    staging = out_dir / "model.partial"
    shutil.rmtree(staging, ignore_errors=True)
    quant: dict[str, Any] = {
        "base": plan.base,
        "base_hash": base.hash,
        "scheme": plan.scheme,
        "kv_cache": plan.kv_cache,
        "method": plan.method,
        "group_size": plan.group_size if plan.scheme in GROUPED_SCHEMES else None,
        "ignore": list(plan.ignore),
        "calibration": asdict(plan.calibration) if plan.needs_calibration else None,
        "calibration_dtype": plan.calibration_dtype,
        "bytes_before": model_bytes(base_dir),
    }
    if plan.method == "awq":
        quant.update(n_grid=plan.n_grid, duo_scaling=plan.duo_scaling)
    log.info(
        "quantising %s (%s, %s %s, group %s) -> %s",
        plan.base,
        base_dir,
        plan.method,
        plan.scheme,
        quant["group_size"],
        model_dir,
    )

    def record(status: str, reason: str, gate: GateResult | None = None) -> Manifest:
        return write_result_manifest(
            out_dir, plan, base=base, model_dir=model_dir, status=status, reason=reason, quant=quant, gate=gate
        )

    t0 = time.monotonic()
    try:
        runner = run_autoawq if plan.method == "autoawq" else run_llmcompressor
        quant.update(runner(plan, base_dir, staging))
    except NotAvailable as e:
        log.error("%s", e)
        shutil.rmtree(staging, ignore_errors=True)
        return record(STATUS_NOT_AVAILABLE, str(e))
    except Exception as e:  # a backend crash is a failed result, not a crashed study
        log.error("quantisation failed:\n%s", traceback.format_exc())
        shutil.rmtree(staging, ignore_errors=True)
        return record(STATUS_FAILED, f"{plan.method} {plan.scheme} failed: {type(e).__name__}: {e}")
    quant["wall_s"] = round(time.monotonic() - t0, 2)
    quant["peak_rss_bytes"] = peak_rss_bytes()
    quant["bytes_after"] = model_bytes(staging)
    shutil.rmtree(model_dir, ignore_errors=True)
    os.replace(staging, model_dir)
    log.info(
        "quantised in %.1f s, peak RSS %.2f GB, %.1f MB -> %.1f MB",
        quant["wall_s"],
        quant["peak_rss_bytes"] / 1e9,
        quant["bytes_before"] / 1e6,
        quant["bytes_after"] / 1e6,
    )
    try:
        gate = quality_gate(base_dir, model_dir, max_nll_increase=plan.max_nll_increase, max_kl=plan.max_kl)
    except Exception as e:  # a checkpoint transformers cannot even load is a failed gate too
        log.error("quality gate could not evaluate the checkpoint:\n%s", traceback.format_exc())
        return record(STATUS_FAILED, f"quality gate could not load or run the checkpoint: {type(e).__name__}: {e}")
    log.info(
        "quality gate: NLL base %.4f, quantised %.4f (+%.4f), KL %.4f over %d tokens: %s",
        gate.nll_base,
        gate.nll_quantized,
        gate.nll_increase,
        gate.kl,
        gate.tokens,
        "passed" if gate.passed else "FAILED: " + gate.reason,
    )
    status = STATUS_OK if gate.passed else STATUS_FAILED
    reason = "" if gate.passed else f"quality gate failed for {plan.name}: {gate.reason}"
    return record(status, reason, gate)
