"""The speed-up model of speculative decoding, S = alpha / (k gamma + c), and the one definition of each of its
inputs. Pure functions: the report's analysis (:mod:`.report`) is their only caller, so every figure of the
specdec table, its verdict checks and the MBU of a speculative level (:mod:`worthit.experiments.kv.report`)
come from one formula each.

One speculative step proposes k draft tokens (k draft steps, each costing gamma target steps), then the
target verifies them in one forward (costing c plain decode steps) and keeps alpha tokens on average
(the accepted drafts plus the one token the target always contributes). Per generated token that is
(k gamma + c) / alpha target steps, hence S = alpha / (k gamma + c) (docs/experiments.md) where every step
drafts; where only a share f of the steps drafts (ngram without a match proposes nothing),
S = (f alpha + 1 - f) / (f (k gamma + c) + 1 - f), the same formula (:func:`predicted_speedup`). The inputs:

- alpha = 1 + accepted / drafts, from the spec-decode counter deltas of a load level of the speculative
  variant (:data:`worthit.prom.SPEC_DRAFTS`, :data:`worthit.prom.SPEC_ACCEPTED_TOKENS`; vLLM logs the same
  quantity as "mean acceptance length"). Steps where the proposer found nothing (ngram without a match)
  carry no draft and are not in it: :func:`draft_coverage` says how often the drafter proposed at all.
- gamma = TPOT of the draft model served alone / TPOT of the target served alone, both at the lowest
  concurrency. Model-free proposers (ngram, suffix) have gamma = 0. A standalone TPOT includes per-step
  serving overhead the in-engine draft does not pay, so gamma is an upper bound.
- c = verify step cost / plain decode step cost, measured *independently* of the speculative run: on the
  base variant's server, requests of a cached context plus m new tokens and one output step, so the only
  forward that differs between m = 1 (a plain decode step) and m = k + 1 (a verify step) is the k extra
  tokens: c = 1 + (TTFT(k + 1) - TTFT(1)) / TPOT_base. Rejection sampling and draft bookkeeping are not in
  it, so this c is a lower bound of the engine's real verify cost.

Deriving c from the speculative run itself (c = alpha TPOT_spec / TPOT_base - k gamma) would make the
prediction equal the measurement by construction; that number is :func:`implied_c`, a diagnostic of what
the model misses, never the input of the prediction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worthit import prom
from worthit.metrics import percentile

MODEL_FREE_METHODS = frozenset({"ngram", "suffix", "ngram_gpu"})
DRAFTS, DRAFT_TOKENS, ACCEPTED = prom.SPEC_DRAFTS, prom.SPEC_DRAFT_TOKENS, prom.SPEC_ACCEPTED_TOKENS
GENERATED = prom.GENERATION_TOKENS


def predicted_speedup(
    alpha: float | None, k: float | None, gamma: float | None, c: float | None, coverage: float | None = 1.0
) -> float | None:
    """S: plain decode time per token over speculative time per token.

    A share ``coverage`` (f) of the decode steps carries a draft: such a step costs k gamma + c plain steps and
    yields alpha tokens; the others are plain decode steps (cost 1, one token). So
    S = (f alpha + 1 - f) / (f (k gamma + c) + 1 - f), which is alpha / (k gamma + c) where every step drafts
    (f = 1: a draft model; ngram proposes only where its n-gram occurs earlier: :func:`draft_coverage`).

    None (no prediction) when an input is unknown or the drafted step's cost k gamma + c is not positive (a c
    measured below zero is timing noise, not a free verify step).
    """
    if alpha is None or k is None or gamma is None or c is None or coverage is None:
        return None
    cost = k * gamma + c
    if cost <= 0:
        return None
    f = min(max(coverage, 0.0), 1.0)
    return (f * alpha + 1 - f) / (f * cost + 1 - f)


def k_for_speedup(alpha: float, gamma: float, c: float, speedup: float) -> float:
    """The draft length at which the model predicts ``speedup`` (inverse of :func:`predicted_speedup`)."""
    if gamma <= 0:
        raise ValueError("with gamma = 0 the speed-up does not depend on k")
    return (alpha / speedup - c) / gamma


def rule_of_thumb(speedup: float | None, threshold: float) -> str | None:
    """The predicted S against ``decide.min_predicted_speedup``: below it the gain will not survive real-world
    overheads."""
    if speedup is None:
        return None
    if speedup < threshold:
        return f"below {threshold:g}x: not worth trying"
    return f"at least {threshold:g}x: worth trying"


def alpha_from_counters(drafts: float, accepted: float) -> float | None:
    """Tokens per verify step: accepted drafts per draft step + the target's own token."""
    return 1.0 + accepted / drafts if drafts > 0 else None


def alpha_of(delta: Mapping[str, float]) -> float | None:
    """Tokens per verify step from a level's counter deltas (/metrics); None where nothing was drafted."""
    return alpha_from_counters(delta.get(DRAFTS, 0.0), delta.get(ACCEPTED, 0.0))


def acceptance_rate(draft_tokens: float, accepted: float) -> float | None:
    """Accepted / proposed draft tokens (a fraction); None where nothing was proposed."""
    return accepted / draft_tokens if draft_tokens > 0 else None


def decode_steps(generated: float, requests: int, drafts: float, accepted: float) -> tuple[float, float] | None:
    """(decode tokens, estimated decode steps) over a level.

    Each request's first token comes from its prefill; every later token comes from a decode step that
    yields 1 + accepted tokens. Accepted tokens past max_tokens are counted by vLLM but cut from the
    output, so ``generated - requests - accepted`` can undercount steps; every draft is a step, which
    bounds it from below.
    """
    tokens = generated - requests
    if tokens <= 0:
        return None
    return tokens, max(drafts, tokens - accepted)


def draft_coverage(delta: Mapping[str, float], requests: int) -> float | None:
    """How often the drafter proposed at all: draft steps / decode steps of a level (1 = at every step; ngram
    without a match in the context proposes nothing), from its counter deltas and its requests (measured and
    warm-up: the counters count both). None where the level generated nothing past its first tokens."""
    steps = decode_steps(delta.get(GENERATED, 0.0), requests, delta.get(DRAFTS, 0.0), delta.get(ACCEPTED, 0.0))
    return delta.get(DRAFTS, 0.0) / steps[1] if steps and steps[1] > 0 else None


def tokens_per_step(delta: Mapping[str, float], requests: int) -> float | None:
    """Tokens a decode step yields on average, steps without a draft included: f alpha + 1 - f (the numerator
    of :func:`predicted_speedup`, f = :func:`draft_coverage`); None where nothing was drafted (a plain decode
    step yields one token) or the level decoded nothing."""
    alpha, f = alpha_of(delta), draft_coverage(delta, requests)
    return None if alpha is None or f is None else f * alpha + 1 - f


def gamma_from_tpot(draft_tpot_ms: float | None, target_tpot_ms: float | None) -> float | None:
    """gamma = the draft model's TPOT served alone / the target's, at the lowest concurrency."""
    if draft_tpot_ms is None or not target_tpot_ms:
        return None
    return draft_tpot_ms / target_tpot_ms


def c_from_verify(
    ttft_verify_ms: float | None, ttft_decode_ms: float | None, tpot_base_ms: float | None
) -> float | None:
    """c = 1 + (TTFT of k + 1 new tokens - TTFT of 1 new token) / plain decode TPOT."""
    if ttft_verify_ms is None or ttft_decode_ms is None or not tpot_base_ms:
        return None
    return 1.0 + (ttft_verify_ms - ttft_decode_ms) / tpot_base_ms


def implied_c(
    alpha: float | None,
    k: int,
    gamma: float | None,
    tpot_spec_ms: float | None,
    *,
    tpot_base_ms: float | None,
    coverage: float | None = 1.0,
) -> float | None:
    """The c at which :func:`predicted_speedup` would reproduce the measured TPOT ratio (a diagnostic, not an
    input): S = tpot_base / tpot_spec solved for c."""
    if alpha is None or gamma is None or coverage is None or tpot_spec_ms is None or not tpot_base_ms or coverage <= 0:
        return None
    f = min(coverage, 1.0)
    measured = tpot_base_ms / tpot_spec_ms
    return ((f * alpha + 1 - f) / measured - (1 - f)) / f - k * gamma


def verify_medians(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], float | None]:
    """TTFT median per (concurrency, new tokens) of the verify timing's rows (files from before the
    concurrency column was measured at concurrency 1)."""
    by: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        if r.get("success") and r.get("ttft_ms") is not None:
            key = (int(r.get("concurrency") or 1), int(r["new_tokens"]))
            by.setdefault(key, []).append(float(r["ttft_ms"]))
    return {key: percentile(v, 50) for key, v in by.items()}


def c_at_concurrency(
    medians: Mapping[tuple[int, int], float | None], k: int, concurrency: int, tpot_base_ms: float | None
) -> float | None:
    """c at a concurrency from the verify timing at that concurrency: 1 + (TTFT(k + 1) - TTFT(1)) / the base's
    TPOT at the same concurrency (None where that concurrency was not timed)."""
    return c_from_verify(medians.get((concurrency, k + 1)), medians.get((concurrency, 1)), tpot_base_ms)


def method_of(spec_config: Mapping[str, Any]) -> str:
    return str(spec_config.get("method") or ("draft_model" if spec_config.get("model") else "unknown"))
