"""Plausibility before publication: checks that encode how each technique works, run on every optimisation
before its verdict is published. One that trips makes the verdict **suspect** (never adopt or reject) and says
what to check (:func:`worthit.report.decide.decide`; thresholds and why in docs/verdicts.md, "Suspect results").

Each check is a small function of plain inputs returning a :class:`Finding` (which check, why, what to check)
or None; :func:`findings` reads their inputs off a study's context and analyses for one optimisation.

- :func:`calibrated_kv_scales`: a checkpoint's calibrated KV-cache scales demonstrably less accurate than the
  same ``--kv-cache-dtype`` with scales of 1.0 (calibration exists to make it more accurate);
- :func:`lossless_accuracy`: an optimisation that cannot change the outputs (prefix caching, speculative
  decoding's exact rejection sampling, a batch cap) whose accuracy moved beyond the noise of nondeterministic
  batching;
- :func:`bandwidth_floor`: a decode step faster than reading the weights allows (MBU above 100 %), and
  :func:`weight_bytes_speedup`: a speed-up above the ratio of the two sides' weight bytes;
- :func:`speculative_model`: speculative decoding measured far outside its own prediction, either way;
- :func:`one_change`: a comparison whose two sides differ in more than the optimisation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from worthit import engine_args as eargs
from worthit.report.evidence import Evidence, TaskAccuracy
from worthit.report.measure import Measure
from worthit.report.outcomes import Finding

if TYPE_CHECKING:
    from worthit.report.context import Context, Pair

__all__ = [
    "LOSSLESS_NOISE_PT",
    "MBU_MAX",
    "SPEC_FACTOR",
    "Finding",
    "SpecPoint",
    "bandwidth_floor",
    "calibrated_kv_scales",
    "weight_bytes_speedup",
    "findings",
    "lossless_accuracy",
    "one_change",
    "speculative_model",
]

# A lossless optimisation's accuracy may move by nondeterministic batching alone (a few items' greedy answers
# flip where floating-point sums are reordered): on the committed samples by at most 0.6 pt at the interval's
# far end. An interval clear of 0 by more than this is not that noise.
LOSSLESS_NOISE_PT = 1.0
# Memory-bandwidth utilisation a decode step cannot exceed: the weights (and the KV cache) are read once a step.
MBU_MAX = 1.0
# Speculative decoding measured at less than half or more than twice its own model's S (alpha / (k gamma + c)).
SPEC_FACTOR = 2.0

KV_CALIBRATION = 'docs/hardware-results.md, "FP8 KV cache with calibrated scales"'
DRAFT_MODEL = 'docs/hardware-results.md, "Draft-model speculation"'


def calibrated_kv_scales(
    calibrated: bool, same_flag_baseline: bool, accuracy: Sequence[TaskAccuracy]
) -> Finding | None:
    """Calibrated KV-cache scales (``calibrated``: the variant's checkpoint carries them) judged against the same
    ``--kv-cache-dtype`` with scales of 1.0 (``same_flag_baseline``) and demonstrably less accurate on a task
    (its whole interval below 0)."""
    if not (calibrated and same_flag_baseline):
        return None
    worse = [t for t in accuracy if t.interval is not None and t.interval[1] < 0]
    if not worse:
        return None
    t = min(worse, key=lambda x: x.delta_pt)
    return Finding(
        "calibrated KV scales",
        f"calibrated scales are less accurate than scales of 1.0 with the same flag ({t.describe()}); calibration "
        "exists to make a low-precision KV cache more accurate",
        "the checkpoint's k_scale/v_scale (their range against the keys' outliers) and how the engine reads them, "
        f"before the format ({KV_CALIBRATION})",
    )


def lossless_accuracy(
    lossless: bool, accuracy: Sequence[TaskAccuracy], noise_pt: float = LOSSLESS_NOISE_PT
) -> Finding | None:
    """An optimisation that leaves the outputs as they were, whose accuracy interval on a task lies clear of 0
    by more than ``noise_pt`` (either way)."""
    if not lossless:
        return None
    moved = [t for t in accuracy if t.interval is not None and (t.interval[1] < -noise_pt or t.interval[0] > noise_pt)]
    if not moved:
        return None
    t = max(moved, key=lambda x: abs(x.delta_pt))
    return Finding(
        "lossless accuracy",
        f"it cannot change what the model generates, yet {t.describe()} lies beyond the {noise_pt:g} pt that "
        "nondeterministic batching moves",
        "that both sides served the same weights, dtype and sampling (the accuracy runs' engine arguments and "
        "lm-eval settings), and that the accuracy runs completed on both",
    )


def bandwidth_floor(variant: str, mbu: float | None, tpot_ms: float | None, limit: float = MBU_MAX) -> Finding | None:
    """A variant whose decode step at its lowest level reads its bytes faster than the GPU's peak bandwidth."""
    if mbu is None or mbu <= limit:
        return None
    tpot = f"TPOT P50 {tpot_ms:,.2f} ms" if tpot_ms is not None else "its TPOT"
    return Finding(
        "bandwidth floor",
        f"{variant}'s {tpot} at its lowest level implies MBU {mbu:.0%}: a decode step faster than reading its "
        "weights once allows",
        "the weights' bytes per step (weight_bytes in kv.parquet), the GPU's peak bandwidth "
        "(hardware.peak_bandwidth_gb_s) and whether the requests generated the tokens they asked for",
    )


def weight_bytes_speedup(
    bytes_without: int | None, bytes_with: int | None, tpot_factor: Measure, where: str = ""
) -> Finding | None:
    """A decode step sped up by more than the ratio of the weights' bytes allows (the TPOT P50 improvement's
    whole interval above bytes without / bytes with), on a comparison whose KV cache and drafting are the same:
    a bandwidth-bound step reads every weight once, so fewer bytes can speed it up at most in proportion."""
    if not bytes_without or not bytes_with or bytes_without <= bytes_with or tpot_factor.value is None:
        return None
    bound = bytes_without / bytes_with
    lo = (tpot_factor.interval() or (tpot_factor.value, tpot_factor.value))[0]
    if lo <= bound:
        return None
    return Finding(
        "bandwidth floor",
        f"TPOT P50 {tpot_factor.value:.2f}x faster{' at ' + where if where else ''} (at least {lo:.2f}x) where the "
        f"weights' bytes allow at most {bound:.2f}x ({bytes_without / 1e9:.2f} GB vs {bytes_with / 1e9:.2f} GB)",
        "that both sides generated the tokens they asked for (output_tokens), the weights' bytes per step "
        "(weight_bytes in kv.parquet) and what else differs between the sides",
    )


@dataclass(frozen=True)
class SpecPoint:
    """One level of a speculative variant: its name, the model's S and the measured speed-up (TPOT)."""

    level: str
    predicted: float | None
    measured: Measure
    inputs: str = ""  # "alpha 2.70, k 5, gamma 0.70, c 3.45"
    c_implied: float | None = None


def speculative_model(points: Sequence[SpecPoint], factor: float = SPEC_FACTOR) -> Finding | None:
    """Speculative decoding measured below 1/``factor`` or above ``factor`` times its own predicted S at a level
    (the measured speed-up's whole interval, or its value where it has none)."""
    off = []
    for p in points:
        m, pred = p.measured, p.predicted
        if pred is None or pred <= 0 or m.value is None:
            continue
        lo, hi = m.interval() or (m.value, m.value)
        if hi / pred < 1 / factor or lo / pred > factor:
            off.append(p)
    if not off:
        return None
    p = max(off, key=lambda x: abs(_log_ratio(x)))
    shown = ", ".join(f"{x.level} \u00d7{(x.measured.value or 0) / (x.predicted or 1):.2f}" for x in off)
    implied = f"; the c that would match: {p.c_implied:.2f}" if p.c_implied is not None else ""
    return Finding(
        "speculative model",
        f"measured speed-up \u00d7{p.measured.value:.2f} at {p.level} against the \u00d7{p.predicted:.2f} its own "
        f"model predicts ({p.inputs}){implied}; measured / predicted {shown}, outside [1/{factor:g}, {factor:g}]",
        "which of alpha, gamma, c or the engine (the draft's forwards inside the engine, CUDA graphs, the "
        f"scheduler the speculative server runs) explains it ({DRAFT_MODEL})",
    )


def _log_ratio(p: SpecPoint) -> float:
    return math.log((p.measured.value or 1.0) / (p.predicted or 1.0))


# Changes that make one optimisation together: a quantised checkpoint, the flag naming its method and the
# kernel chosen for it; an FP8 KV cache and the flag that computes its scales.
_TOGETHER = ({"model", "--quantization", "--linear-backend"}, {"--kv-cache-dtype", "--calculate-kv-scales"})


def one_change(changes: Mapping[str, str], variant: str = "<variant>") -> Finding | None:
    """A comparison whose sides differ in more than one thing (``changes``: what differs -> how, e.g.
    ``{"model": "smollm2-135m-awq vs smollm2-135m", "--dtype": "bfloat16 vs float32"}``), other than the
    changes that make one optimisation together."""
    keys = set(changes)
    if len(keys) <= 1 or any(keys <= group for group in _TOGETHER):
        return None
    shown = "; ".join(f"{k} ({v})" if v else k for k, v in changes.items())
    return Finding(
        "more than one change",
        f"its two sides differ in {len(keys)} things: {shown}; the effect cannot be attributed to one of them",
        f"a baseline that differs in the optimisation alone (variants.{variant}.baseline: a variant with the "
        "other settings), or each change measured on its own",
    )


def _changes(ctx: Context, pair: Pair) -> dict[str, str]:
    """What differs between the two sides of an optimisation: the model, each engine flag (the flags an
    experiment names, one change each, :func:`worthit.report.experiments.changes`; memory and context sizes
    left out), extra arguments, environment."""
    from worthit.report.experiments import changes

    base, v = pair.base or ctx.baseline, pair.variant
    a, b = ctx.engine_args(base), ctx.engine_args(v)
    out: dict[str, str] = {}
    if ctx.model(base) != ctx.model(v):
        out["model"] = f"{ctx.model(v)} vs {ctx.model(base)}"
    named, named_flags = changes(a, b)
    out.update({c.name: "" for c in named})
    skip = {*named_flags, *QUIET_FLAGS}
    for key in sorted({eargs.flag(k) for k in (*a, *b)} - skip):
        va, vb = eargs.get(a, key), eargs.get(b, key)
        if va != vb:
            out[f"--{key}"] = f"{'unset' if vb is None else vb} vs {'unset' if va is None else va}"
    if ctx.extra_args(base) != ctx.extra_args(v):
        out["extra arguments"] = "differ"
    if ctx.env(base) != ctx.env(v):
        out["environment"] = "differs"
    return out


# Flags an optimisation's name leaves out (how much memory and context the engine gets, not what it runs).
QUIET_FLAGS = ("gpu-memory-utilization", "max-model-len", "kv-cache-memory-bytes")


def _kv_calibrated(ctx: Context, pair: Pair) -> tuple[bool, bool]:
    """(the variant's checkpoint carries calibrated KV-cache scales of the base's model, the base serves the
    same --kv-cache-dtype with its default scales)."""
    from worthit.report.experiments import kv_scales_of

    base = pair.base or ctx.baseline
    scales = kv_scales_of(ctx.study.cfg, ctx.model(pair.variant))
    calibrated = scales is not None and scales == ctx.model(base)
    kv = "kv-cache-dtype"
    same = (
        kv_scales_of(ctx.study.cfg, ctx.model(base)) is None
        and eargs.get(ctx.engine_args(base), kv) is not None
        and eargs.get(ctx.engine_args(base), kv) == eargs.get(ctx.engine_args(pair.variant), kv)
    )
    return calibrated, same


def findings(ctx: Context, pair: Pair, e: Evidence) -> list[Finding]:
    """Every plausibility check on one optimisation, with its inputs read off the study (none for a control)."""
    from worthit.report.experiments import registered

    if pair.control or e.status != "ok":
        return []
    accuracy = [] if e.random_weights else list(e.accuracy)
    calibrated, same_flag = _kv_calibrated(ctx, pair)
    found = [
        calibrated_kv_scales(calibrated, same_flag, accuracy),
        lossless_accuracy(pair.lossless, accuracy),
        *(  # each experiment's checks that read the evidence too (the capacity analysis' MBU and weight bytes)
            f for x in registered() if x.checks is not None for f in x.checks(ctx, ctx.analyses.get(x.name), pair, e)
        ),
        *(  # each experiment's own checks, on its analysis (docs/verdicts.md, "Suspect results")
            f for x in registered() if x.findings is not None for f in x.findings(ctx, ctx.analyses.get(x.name), pair)
        ),
        one_change(_changes(ctx, pair), pair.variant),
    ]
    return [f for f in found if f is not None]
