"""The quantisation stage (``quantize_model``): a base model -> a quantised checkpoint + manifest.

Backends, behind one interface (:func:`quantize`; :mod:`.backends`):
  ``awq``      llm-compressor's AWQ transform + a separate ``QuantizationModifier`` (W4A16[_ASYM])
  ``rtn``      llm-compressor round-to-nearest (W4A16[_ASYM], W8A8 int8, FP8_DYNAMIC; no calibration)
  ``autoawq``  AutoAWQ, only where it is installed (patched: its CPU weight backup aliases the live
               tensor and silently corrupts the checkpoint); otherwise recorded as not available.

Every quantised model passes a quality gate before anything serves it (:mod:`.gate`): NLL of the held-out
text (``data/heldout.jsonl``, written by the project) under the quantised checkpoint as written to disk, vs
the base model, plus the mean KL between their next-token distributions. A model beyond the bound is
a *failed* result: its manifest (:mod:`.manifest`) says ``status: failed`` and why, and the serve stage
records the failure instead of starting vLLM (see :mod:`worthit.server`).

The plan (:class:`QuantizePlan`, :mod:`.spec`) and its checks (:func:`validate_plan`, :mod:`.checks`) are
pure: they read the base model's config.json and safetensors headers, so they run in the workflow
environment at parse time and again before any work. torch, transformers and llm-compressor are imported
only inside the functions that need them; the stage runs in the quantize environment
(``<quantize_python> -m worthit.experiments.quantize``, :mod:`.cli`).

Modules: ``spec`` (the plan and its allowed values), ``checks``, ``text`` (calibration and held-out text),
``backends``, ``gate``, ``manifest``, ``run`` (:func:`quantize`), ``cli``, ``report`` (a quantised model's name in
the report). Its rules: ``workflow/rules/quantize.smk``,
included through :func:`register` like every experiment's; its config lives under ``models.<name>.quantize``
(``config/schema.yaml``), and the variants that serve a quantised model are what the report compares.
"""

from __future__ import annotations

from worthit.experiments.quantize.backends import (
    llmcompressor_awq_architectures,
    llmcompressor_recipe,
    patch_llmcompressor_for_cpu,
    recast_saved_floats,
    run_autoawq,
    run_llmcompressor,
)
from worthit.experiments.quantize.checks import (
    architecture,
    check_quantize_plans,
    quantised_linears,
    safetensors_shapes,
    validate_plan,
)
from worthit.experiments.quantize.cli import main
from worthit.experiments.quantize.gate import GateResult, nll_and_kl, quality_gate
from worthit.experiments.quantize.manifest import (
    STATUS_FAILED,
    STATUS_NOT_AVAILABLE,
    STATUS_OK,
    manifest_status,
    model_bytes,
    peak_rss_bytes,
    weights_row,
    write_result_manifest,
)
from worthit.experiments.quantize.run import quantize
from worthit.experiments.quantize.spec import (
    AUTOAWQ_ARCHITECTURES,
    GROUP_SIZES,
    GROUPED_SCHEMES,
    KV_CACHE_SCHEMES,
    METHOD_SCHEMES,
    METHODS,
    NO_WEIGHTS,
    SCHEMES,
    CalibrationText,
    NotAvailable,
    QuantizeError,
    QuantizePlan,
)
from worthit.experiments.quantize.text import (
    CALIBRATION_FILE,
    DATA,
    HELDOUT_FILE,
    calibration_texts,
    read_texts,
    token_windows,
)

__all__ = [
    "AUTOAWQ_ARCHITECTURES",
    "CALIBRATION_FILE",
    "DATA",
    "GROUPED_SCHEMES",
    "GROUP_SIZES",
    "HELDOUT_FILE",
    "KV_CACHE_SCHEMES",
    "METHODS",
    "METHOD_SCHEMES",
    "NO_WEIGHTS",
    "SCHEMES",
    "STATUS_FAILED",
    "STATUS_NOT_AVAILABLE",
    "STATUS_OK",
    "CalibrationText",
    "GateResult",
    "NotAvailable",
    "QuantizeError",
    "QuantizePlan",
    "architecture",
    "calibration_texts",
    "check_quantize_plans",
    "llmcompressor_awq_architectures",
    "llmcompressor_recipe",
    "main",
    "manifest_status",
    "model_bytes",
    "nll_and_kl",
    "patch_llmcompressor_for_cpu",
    "peak_rss_bytes",
    "quality_gate",
    "quantised_linears",
    "quantize",
    "read_texts",
    "recast_saved_floats",
    "run_autoawq",
    "run_llmcompressor",
    "safetensors_shapes",
    "token_windows",
    "validate_plan",
    "weights_row",
    "write_result_manifest",
]

NAME = "quantize"


def register() -> None:
    """Register the stage's rule file the way an experiment outside the package does. It measures nothing on
    a server (no turn, not a value of ``variants.<v>.experiments``): its output is a model that variants serve."""
    from worthit import measurements
    from worthit.experiments.quantize import report
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(NAME, measurements.no_consumers, "quantize.smk", order=0, selectable=False)
    )
    experiments.register(report.EXPERIMENT)
