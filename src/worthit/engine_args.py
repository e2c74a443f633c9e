"""vLLM engine arguments as the study config spells them: one spelling, one lookup, one cache rule.

A variant's ``engine_args`` may spell a flag with dashes or underscores and with or without its
leading ``--`` (``max_model_len``, ``max-model-len``, ``--max-model-len``); :func:`flag` turns every
spelling into the one ``vllm serve`` uses. This module imports only the standard library: the server
supervisor runs it in any stage's environment.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

PREFIX_CACHING = "enable-prefix-caching"
NO_PREFIX_CACHING = "no-enable-prefix-caching"
SPECULATIVE_CONFIG = "speculative-config"
ASYNC_SCHEDULING = "async-scheduling"
NO_ASYNC_SCHEDULING = "no-async-scheduling"
# The speculative methods vLLM 0.25 keeps async scheduling on with (vllm/config/vllm.py, VllmConfig: EAGLE and
# MTP kinds, ngram on the GPU, DSpark); any other method turns its default off, and asking for both is refused.
ASYNC_SPEC_METHODS = frozenset({"eagle", "eagle3", "mtp", "dflash", "extract_hidden_states", "ngram_gpu", "dspark"})
# Flags that are themselves a negation: their false is vLLM's default, so false leaves them out
# (worthit.server.engine_flags gives any other flag's false as its --no- form).
NEGATIONS = ("no-", "disable-")


def flag(key: object) -> str:
    """The flag name of an engine argument, without its dashes: ``--max_model_len`` -> ``max-model-len``."""
    return str(key).lstrip("-").replace("_", "-")


def get(args: Mapping[str, Any] | None, name: str, default: Any = None) -> Any:
    """An engine argument by its flag name, however ``args`` spells it; ``default`` when absent.

    ``name`` may be spelled any way too. Where ``args`` holds two spellings of one flag, the last wins
    (as it would on the ``vllm serve`` command line).
    """
    wanted = flag(name)
    value = default
    for key, v in (args or {}).items():
        if flag(key) == wanted:
            value = v
    return value


def has(args: Mapping[str, Any] | None, name: str) -> bool:
    """Whether ``args`` sets the flag ``name`` (in any spelling), whatever its value."""
    wanted = flag(name)
    return any(flag(key) == wanted for key in args or {})


def without(args: Mapping[str, Any] | None, *names: str) -> dict[str, Any]:
    """``args`` less the flags ``names`` (in any spelling), the rest as given."""
    drop = {flag(n) for n in names}
    return {k: v for k, v in (args or {}).items() if flag(k) not in drop}


def negative_form(name: str) -> str | None:
    """The flag that turns boolean flag ``name`` off, as vLLM spells it (``enable-chunked-prefill`` ->
    ``no-enable-chunked-prefill``); None for a flag that is itself a negation (:data:`NEGATIONS`), whose
    false is its default and is left out."""
    name = flag(name)
    return None if name.startswith(NEGATIONS) else f"no-{name}"


def merged(base: Mapping[str, Any] | None, over: Mapping[str, Any] | None) -> dict[str, Any]:
    """``base``'s flags with ``over``'s on top, flag by flag in any spelling: a flag ``over`` sets replaces
    ``base``'s whole (a mapping too), as a variant's ``engine_args`` replace serve's. A plain dict merge would
    keep both ``max_model_len`` and ``max-model-len`` and put both on the command line."""
    over = dict(over or {})
    out = without(base, *over)
    out.update(over)
    return out


def prefix_caching_on(args: Mapping[str, Any] | None) -> bool:
    """Whether vLLM serves these arguments with automatic prefix caching.

    vLLM's V1 engine (every version the envs pin, serve-cpu's included) turns it on by default; a
    variant turns it off with ``no-enable-prefix-caching: true`` or ``enable-prefix-caching: false``.
    ``None`` leaves the flag out of the command line (see ``worthit.server.engine_flags``), so the default holds.
    """
    if get(args, NO_PREFIX_CACHING):
        return False
    return get(args, PREFIX_CACHING) is not False


def async_scheduling_on(args: Mapping[str, Any] | None) -> bool:
    """Whether vLLM 0.25 on a GPU serves these arguments with async scheduling (the scheduler plans step n+1
    while step n runs).

    Its default (``async_scheduling`` None) is on, unless speculative decoding by a method outside
    :data:`ASYNC_SPEC_METHODS` (ngram on the CPU, suffix, a draft model) turns it off; a variant sets it with
    ``async-scheduling: true/false`` or ``no-async-scheduling: true``. vLLM's CPU backend turns it off whatever
    the flag says (the plan's ``async_scheduling`` rule, docs/experiments.md).
    """
    if get(args, NO_ASYNC_SCHEDULING):
        return False
    asked = get(args, ASYNC_SCHEDULING)
    if asked is not None:
        return bool(asked)
    sc = speculative_config(args)
    method = str((sc or {}).get("method") or ("draft_model" if sc and sc.get("model") else "")).lower()
    return not sc or method in ASYNC_SPEC_METHODS or method.endswith("_mtp")


def speculation_zero_off(args: Mapping[str, Any] | None) -> dict[str, Any]:
    """``args`` with a ``speculative-config`` that proposes no tokens (``num_speculative_tokens: 0``) left
    out: vLLM has no zero-token speculation, the way to ask for none is no ``--speculative-config`` at all.
    A search over the speculative k (``worthit tune``'s ``speculative-config.num_speculative_tokens: [0, 2,
    4]``) thus has "off" as one of its values."""
    sc = get(args, SPECULATIVE_CONFIG)
    if isinstance(sc, Mapping) and "num_speculative_tokens" in sc and sc["num_speculative_tokens"] == 0:
        return without(args, SPECULATIVE_CONFIG)
    return dict(args or {})


def speculative_config(args: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``speculative-config`` mapping (given as one, or as its JSON in a string, as ``vllm serve`` takes
    it), or None when the variant does not decode speculatively."""
    sc = get(args, SPECULATIVE_CONFIG)
    if isinstance(sc, str):
        try:
            sc = json.loads(sc)
        except ValueError:
            return None
    return dict(sc) if isinstance(sc, Mapping) and sc else None
