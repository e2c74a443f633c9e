"""The quantised model's manifest: what the stage writes (:func:`write_result_manifest`) and what the serve
stage and the report read back (:func:`manifest_status`, :func:`weights_row`). Standard library only: the
supervisor and the workflow environment import it."""

from __future__ import annotations

import resource
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worthit.experiments.quantize.spec import QuantizePlan
from worthit.models import Manifest, build_manifest

if TYPE_CHECKING:
    from worthit.experiments.quantize.gate import GateResult

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_NOT_AVAILABLE = "not_available"


def peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def model_bytes(model_dir: Path) -> int:
    return sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))


def write_result_manifest(
    out_dir: Path,
    plan: QuantizePlan,
    *,
    base: Manifest,
    model_dir: Path,
    status: str,
    reason: str,
    quant: Mapping[str, Any],
    gate: GateResult | None,
) -> Manifest:
    """The quantised model's manifest: the usual model manifest (files, hashes, bytes) plus, in
    ``extra``, the quantisation record, the gate's numbers and the status the serve stage obeys."""
    source = f"quantize:{plan.base}:{plan.method}:{plan.scheme}" + (f"+kv_{plan.kv_cache}" if plan.kv_cache else "")
    if (model_dir / "config.json").exists():
        m = build_manifest(plan.name, source, base.hash, model_dir)
    else:
        m = Manifest(
            name=plan.name,
            source=source,
            revision=base.hash,
            model_dir=str(model_dir.resolve()),
            fetched_at=time.time(),
        )
    m.extra.update(
        status=status, reason=reason, quantization=dict(quant), quality_gate=gate.to_dict() if gate else None
    )
    m.write(out_dir / "manifest.json")
    return m


def manifest_status(manifest: Mapping[str, Any]) -> tuple[str, str]:
    """(status, reason) of any model manifest: what :func:`write_result_manifest` put in ``extra``
    (a failed quality gate, a backend that is not available); fetched models carry none and are ok.
    The serve stage refuses any status but ok. Standard library only (the supervisor imports it)."""
    extra = manifest.get("extra") or {}
    return str(extra.get("status") or STATUS_OK), str(extra.get("reason") or "")


def _scheme_label(q: Mapping[str, Any]) -> str | None:
    """The weights' scheme, and the KV-cache scales beside it: "W4A16_ASYM", "NONE + KV fp8"."""
    if not q.get("scheme"):
        return None
    return str(q["scheme"]) + (f" + KV {q['kv_cache']}" if q.get("kv_cache") else "")


def weights_row(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison table's "weights" facts of one model: scheme, bytes, cost and the gate's numbers."""
    extra = manifest.get("extra") or {}
    q = extra.get("quantization") or {}
    g = extra.get("quality_gate") or {}
    cal = q.get("calibration") or {}
    status, reason = manifest_status(manifest)
    return {
        "model": manifest.get("name"),
        "status": status,
        "reason": reason or None,
        "scheme": _scheme_label(q),
        "method": q.get("method"),
        "group_size": q.get("group_size"),
        "calibration_samples": cal.get("samples"),
        "calibration_seq_len": cal.get("seq_len"),
        "quantize_wall_s": q.get("wall_s"),
        "quantize_peak_rss_gib": (q["peak_rss_bytes"] / 2**30 if q.get("peak_rss_bytes") else None),
        "weight_bytes_before": q.get("bytes_before"),
        "weight_bytes": q.get("bytes_after", manifest.get("weight_bytes")),
        "nll_base": g.get("nll_base"),
        "nll": g.get("nll_quantized"),
        "nll_increase": g.get("nll_increase"),
        "kl": g.get("kl"),
    }
