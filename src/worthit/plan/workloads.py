"""Which workload each experiment's load levels send, and why (a line of ``worthit plan`` each).

Random-token prompts suit what their content cannot change: a KV pool's capacity, a kernel's speed, a
batch cap, a cache hit (which needs identical tokens, not meaningful ones). Speculative decoding of every
method depends on what is generated: a model fed random tokens falls into loops, and a drafter that looks
n-grams up predicts the loop, so its acceptance and speed-up say nothing of a user's traffic
(docs/results-tables.md, ``repeated_ngram_share``). Its variants are judged on real text (a ``sharegpt`` or
``jsonl`` workload); the plan warns where a study measures one on random tokens only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from worthit.config import Study
from worthit.experiments.loadtest.section import LoadtestSection
from worthit.experiments.loadtest.section import section as loadtest_section
from worthit.experiments.specdec.section import spec_variants
from worthit.loadgen.levels import LoadLevel
from worthit.loadgen.workloads import REAL_TEXT_KINDS, real_text

__all__ = ["REAL_TEXT_KINDS", "WorkloadChoice", "workload_choices", "workload_lines"]
CONTENT_FREE = "content cannot change KV capacity, a batch cap, a cache hit or a kernel's speed"
CONTENT_DECIDES = (
    "speculative decoding depends on what is generated: on random tokens the model loops and a drafter "
    "predicts the loop"
)


@dataclass(frozen=True)
class WorkloadChoice:
    """One experiment's levels on one variant: what each sends, and why that workload."""

    experiment: str
    variant: str | None
    levels: dict[str, str]  # level name -> what it sends
    why: str
    warning: str | None = None

    def line(self) -> str:
        where = f"{self.experiment} · {self.variant}" if self.variant else self.experiment
        groups: dict[str, list[str]] = {}
        for level, what in self.levels.items():
            groups.setdefault(what, []).append(level)
        sends = "; ".join(f"{', '.join(names)}: {what}" for what, names in groups.items())
        return f"{where}: {sends} ({self.why})" + (f". WARNING: {self.warning}" if self.warning else "")


def _sends(lt: LoadtestSection, variant: str, level: LoadLevel) -> tuple[str, bool]:
    """What a level sends in words, and whether it is real text."""
    name = lt.workload_name(variant, level)
    if name is None:
        return f"random tokens ({lt.prompt_tokens}-token prompts)", False
    spec: Mapping[str, Any] = lt.workloads[name]
    kind = str(spec["kind"])
    if kind == "sharegpt":
        turns = spec.get("turns", 1)
        what = "first turns" if turns == 1 else f"conversations replayed, up to {turns} turns"
        source = "ShareGPT V3" if not spec.get("path") else str(spec["path"])
        return f"{name} ({source} {what})", real_text(kind)
    if kind == "jsonl":
        return f"{name} (your prompts, {spec['path']})", real_text(kind)
    return f"{name} (random tokens, {kind} workload)", real_text(kind)


def _added(lt: LoadtestSection, level: LoadLevel) -> str | None:
    """Why worthit added a workload level the variant measures (None: the study's own level)."""
    for wl in lt.workload_levels:
        if wl.level == level and wl.added:
            return wl.added
    return None


def workload_choices(cfg: Mapping[str, Any]) -> list[WorkloadChoice]:
    """Per load-tested variant (and the prefix experiment) what its levels send and why."""
    study, lt = Study(cfg), loadtest_section(cfg)
    speculative = set(spec_variants(study))
    out = []
    for variant in lt.load_tested:
        levels = lt.variant_levels(variant)
        sends = {lv.name: _sends(lt, variant, lv) for lv in levels}
        real = [name for name, (_, is_real) in sends.items() if is_real]
        warning = None
        added = sorted({why for lv in levels if (why := _added(lt, lv))})
        if variant in speculative:
            why = CONTENT_DECIDES + (f"; judged on real text ({', '.join(real)})" if real else "")
            if not real:
                opted_out = lt.real_text_for_speculative_reason
                warning = f"{variant} is measured on random tokens only" + (
                    f" (loadtest.real_text_for_speculative is false: {opted_out})"
                    if opted_out
                    else "; add a real-text level (workloads: {sharegpt: {kind: sharegpt}} and "
                    "loadtest.workload_levels)"
                )
        else:
            peers = [v for v in spec_variants(study) if set(real) & {lv.name for lv in lt.variant_levels(v)}]
            why = CONTENT_FREE + (
                f"; its real-text levels are what {', '.join(peers)} is compared with" if peers else ""
            )
        if added:
            why += f"; ShareGPT levels {'; '.join(added)}"
        out.append(WorkloadChoice("loadtest", variant, {k: v for k, (v, _) in sends.items()}, why, warning))
    from worthit.experiments.prefix.section import section as prefix_section

    prefix = prefix_section(cfg)
    if any("prefix" in study.variant(v).experiments for v in study.variants) and prefix.lengths:
        lengths = ", ".join(str(n) for n in prefix.lengths)
        out.append(
            WorkloadChoice(
                "prefix",
                None,
                {f"shared prefixes of {lengths} tokens": "random tokens"},
                "a cache hit needs identical tokens, not meaningful ones",
            )
        )
    return out


def workload_lines(cfg: Mapping[str, Any]) -> list[str]:
    """``worthit plan``'s lines: which workload each experiment's levels use, and why."""
    return [c.line() for c in workload_choices(cfg)]
