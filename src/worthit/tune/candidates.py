"""The tune's own study: one load-tested variant per candidate (``tune_<id>``) and one per fresh start of the
confirmation (``tune_<id>_start<k>``), each its base variant with the candidate's flag values
(:func:`derived_config`), and how a candidate reads (:func:`describe`)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit.errors import InputError
from worthit.plan.shapes import parallel_sizes
from worthit.tune.prune import candidate_args
from worthit.tune.search import Candidate
from worthit.tune.space import changed_args
from worthit.tune.studies import own_study

TUNE_SUFFIX = "-tune"
VARIANT_PREFIX = "tune_"


def tune_study(study: str) -> str:
    """The name of the tune's study (its results folder is ``results/<name>``)."""
    return f"{study}{TUNE_SUFFIX}"


def variant_of(candidate_id: str) -> str:
    return f"{VARIANT_PREFIX}{candidate_id}"


def tune_dir(cfg: Mapping[str, Any], workdir: Path = Path(".")) -> Path:
    return workdir / "results" / tune_study(str(cfg["study"])) / "tune"


SPECULATIVE = "speculative-config."


def describe(values: Mapping[str, Any]) -> str:
    """A candidate as a person reads it (``max-num-seqs=8``; vLLM's defaults when it sets nothing). A
    speculative k of 0 serves no speculation (:func:`~.space.changed_args`), so its speculative keys read
    ``no speculation`` rather than a method that is not served."""
    off = any(k.startswith(SPECULATIVE) for k in values) and "speculative-config" not in changed_args(values)
    shown = [f"{k}={v}" for k, v in values.items() if not (off and k.startswith(SPECULATIVE))]
    return ", ".join([*shown, *(["no speculation"] if off else [])]) or "vLLM's defaults"


def gpus_of(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> int:
    """The GPUs a candidate's server holds (tensor x pipeline x data parallel), at least one."""
    tp, pp, dp = parallel_sizes(candidate_args(cfg, values)[1])
    return max(1, tp * pp * dp)


def start_variant(candidate_id: str, start: int) -> str:
    """The variant of a candidate's ``start``-th fresh server in the confirmation (:mod:`.fresh_starts`)."""
    return f"{VARIANT_PREFIX}{candidate_id}_start{start}"


def own_args(serve: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's engine arguments ``args`` (serve's, its variant's and its values merged) as a variant
    of the tune's study sets them over ``serve``'s: what differs from serve's, and null for a flag of serve's
    the candidate does not serve (a speculative k of 0 over serve's ``speculative-config``), which
    ``worthit.server.engine_flags`` leaves out of the command line. Serve's flags themselves stay in serve."""
    own = {k: v for k, v in args.items() if not (eargs.has(serve, k) and eargs.get(serve, k) == v)}
    return {**own, **{k: None for k in serve if not eargs.has(args, k)}}


def _variant(cfg: Mapping[str, Any], c: Candidate, what: str) -> dict[str, Any]:
    base, args = candidate_args(cfg, c.values)
    v = copy.deepcopy(dict(cfg["variants"][base]))
    v["engine_args"] = own_args(cfg["serve"]["engine_args"], args)
    v["experiments"] = ["loadtest"]
    v.pop("baseline", None)
    v["description"] = f"{what} {c.id}: {base} with {describe(c.values)}"
    return v


def derived_config(
    cfg: Mapping[str, Any],
    candidates: Iterable[Candidate],
    source: str = "tune",
    starts: Iterable[tuple[Candidate, int]] = (),
) -> dict[str, Any]:
    """The tune's study: ``cfg`` with one load-tested variant per candidate, and one per fresh start of the
    confirmation (``starts``: candidate and start number), validated with its defaults filled."""
    variants: dict[str, Any] = {}
    for c in candidates:
        variants[variant_of(c.id)] = _variant(cfg, c, "tune candidate")
    for c, k in starts:
        variants[start_variant(c.id, k)] = _variant(cfg, c, f"fresh start {k} of the confirmation of")
    if not variants:
        raise InputError(f"{source}: the tune has no candidate to serve")
    name = tune_study(str(cfg["study"]))
    return own_study(cfg, study=name, variants=variants, baseline=next(iter(variants)), source=source)
