"""How much a response repeats itself: the measure that tells a level whose responses are loops.

A model fed random tokens (or driven into a corner) falls into loops, and a drafter that looks n-grams up in
the prompt and the output so far (ngram speculative decoding) then predicts the loop: its acceptance measures
the loop, not the traffic a user serves (docs/results-tables.md, ``repeated_ngram_share``).

``repeated_ngram_share`` of one response: the share of its token 4-grams (every run of 4 consecutive tokens of
the generated text, re-encoded with the served model's tokenizer) that repeat a 4-gram seen earlier in the same
response. 0 for text that never repeats a 4-gram, close to 1 for a response that is one short loop; null for a
response of fewer than 4 tokens. Tokens, not words: the drafter matches tokens, and text without spaces (code,
Chinese) has tokens too. A response is *a loop* when its share is at least :data:`LOOP_SHARE`; a level's
responses are *mostly loops* when their median share is at least :data:`LOOP_SHARE` (:func:`mostly_loops`).
Standard library only.
"""

from __future__ import annotations

import statistics
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

NGRAM = 4
# A response with at least this share of repeated 4-grams is a loop; a level whose median response reaches it
# is mostly loops. Natural text repeats few 4-grams, a response that settles into a loop all but its first
# cycle's: on the embedded default (SmolLM2-135M, 32 output tokens, config/config.yaml) responses to
# random-token prompts repeated 0.83-0.93 of theirs, responses to ShareGPT first turns 0-0.22.
LOOP_SHARE = 0.5


def repeated_ngram_share(tokens: Sequence[Hashable], n: int = NGRAM) -> float | None:
    """The share of the ``n``-grams of ``tokens`` that repeat an earlier ``n``-gram of the same sequence
    (None for fewer than ``n`` tokens)."""
    total = len(tokens) - n + 1
    if total < 1:
        return None
    seen: set[tuple[Hashable, ...]] = set()
    repeats = 0
    for i in range(total):
        gram = tuple(tokens[i : i + n])
        if gram in seen:
            repeats += 1
        else:
            seen.add(gram)
    return repeats / total


@dataclass(frozen=True)
class LevelRepetition:
    """A level's responses: how many had a share, their median share, and the share of them that are loops."""

    n: int
    repeated_ngram_share_p50: float | None
    looping_share: float | None

    @property
    def mostly_loops(self) -> bool:
        return mostly_loops(self.repeated_ngram_share_p50)


def level_repetition(shares: Iterable[float | None]) -> LevelRepetition:
    """The summary of a level's per-response shares (nulls, responses too short to have a 4-gram, left out)."""
    vals = [float(s) for s in shares if s is not None and s == s]
    if not vals:
        return LevelRepetition(0, None, None)
    return LevelRepetition(len(vals), statistics.median(vals), sum(v >= LOOP_SHARE for v in vals) / len(vals))


def mostly_loops(repeated_ngram_share_p50: float | None) -> bool:
    """True when a level's median response repeats at least :data:`LOOP_SHARE` of its 4-grams: its responses
    are mostly loops (and a speculative acceptance measured on it is the drafter predicting the loops)."""
    return repeated_ngram_share_p50 is not None and repeated_ngram_share_p50 >= LOOP_SHARE
