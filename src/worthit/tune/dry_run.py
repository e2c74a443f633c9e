"""``worthit tune --dry-run``: the tune a study config asks for, checked and counted, with nothing served.

It validates the ``tune:`` section (config/schema.yaml, then :func:`~worthit.tune.space.parse`),
checks every space flag against the serve environment's ``vllm serve --help=all``, and prints the space, the
number of candidates, the candidates the plan prunes before anything is served (a max-num-seqs the
predicted KV pool can never use) and the budget. Without ``--dry-run`` the same checks come first, then the
rounds (:mod:`worthit.tune.rounds`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit import errors
from worthit.config import ROOT, Study, load
from worthit.errors import InputError
from worthit.experiments.loadtest.section import section as load_section
from worthit.plan.cli import parse_model_configs
from worthit.plan.hardware import Hardware, hardware_for
from worthit.plan.model_sources import model_configs
from worthit.tune import flags as flagsmod
from worthit.tune.accuracy_gate import changes_outputs, describe_key, served_key
from worthit.tune.prune import MAX_NUM_SEQS, bound, candidate_args, kv_prune
from worthit.tune.space import Choices, Dimension, Range, TuneSection, parse

MAX_CHECKED = 4096  # combinations of the other flags checked one by one; past it, their range ends x choices


@dataclass(frozen=True)
class PrunedGroup:
    """The max-num-seqs values the plan prunes for one combination of the other flags."""

    others: dict[str, Any]
    values: list[int]  # the pruned max-num-seqs values
    reason: str  # the reason at the largest of them


@dataclass(frozen=True)
class DryRun:
    section: TuneSection
    vllm_version: str
    hardware: Hardware
    candidates: int | None  # None: a continuous range
    pruned: list[PrunedGroup]
    at_ends: bool  # the other flags were checked at their range ends only
    checked: int  # candidates the plan checked (every one, or those at the other flags' range ends)
    accuracy_gated: tuple[str, ...] = ()  # served configurations that change what is served (.accuracy_gate)

    @property
    def pruned_count(self) -> int:
        return sum(len(g.values) for g in self.pruned)


def _others(section: TuneSection) -> tuple[list[dict[str, Any]], bool]:
    """Every combination of the flags besides max-num-seqs (their range ends where they are too many)."""
    keys = [k for k in section.space if k != MAX_NUM_SEQS]
    dims = [section.space[k] for k in keys]
    sizes = [d.size() for d in dims]
    at_ends = any(n is None for n in sizes) or math.prod(n or 1 for n in sizes) > MAX_CHECKED
    axes: list[list[Any]] = [
        list(d.choices) if isinstance(d, Choices) else (sorted({d.low, d.high}) if at_ends else d.values())
        for d in dims
    ]
    if at_ends:
        axes = [
            [int(v) for v in ax] if isinstance(d, Range) and d.integer else ax for ax, d in zip(axes, dims, strict=True)
        ]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*axes)], at_ends


def _seq_values(dim: Dimension) -> list[int]:
    if isinstance(dim, Range):
        return [int(v) for v in dim.values()]
    return [int(c) for c in dim.choices if isinstance(c, int | float) and not isinstance(c, bool)]


def dry_run(
    cfg: Mapping[str, Any],
    *,
    source: str,
    hw: Hardware,
    accepted: tuple[str, set[str]],
    root: Path = Path("."),
    hub: bool = True,
    given: Mapping[str, str] | None = None,
) -> DryRun:
    """Check and count the tune of a validated config on ``hw`` (``accepted``: vLLM's version and flags)."""
    section = parse(cfg, source)
    if not section.space:
        raise InputError(f"{source}: tune.space is empty: no tune to run (name flags to search, e.g. max-num-seqs)")
    version, accepted_flags = accepted
    flagsmod.check_flags(section.flags, accepted_flags, version=version, source=source)
    combos, at_ends = _others(section)
    groups: list[PrunedGroup] = []
    checked = 0
    if MAX_NUM_SEQS in section.space:
        configs = model_configs(cfg, root, given, hub)
        lt = load_section(cfg)
        max_load = max(lt.levels, default=None)
        seqs = _seq_values(section.space[MAX_NUM_SEQS])
        checked = len(combos) * len(seqs)
        for others in combos:
            variant, args = candidate_args(cfg, {**others, MAX_NUM_SEQS: max(seqs)})
            b = bound(
                configs.get(cfg["variants"][variant]["model"], (None, None, None, ""))[0],
                args,
                hw,
                prompt_tokens=lt.prompt_tokens,
                output_tokens=lt.output_tokens,
                kv_margin=section.kv_margin,
                max_load=max_load,
            )
            reason = kv_prune(b, section)
            if reason and b.fit_seqs is not None:
                groups.append(PrunedGroup(others, [v for v in seqs if v > b.fit_seqs], reason))
    gated = sorted({served_key(cfg, c) for c in combos if changes_outputs(cfg, c)})
    return DryRun(section, version, hw, section.size(), groups, at_ends, checked, tuple(map(describe_key, gated)))


def lines(d: DryRun) -> list[str]:
    """The dry run as printed."""
    s = d.section
    out = [f"tune on {d.hardware.name} (vLLM {d.vllm_version}): every flag accepted by vllm serve --help=all"]
    out.append("space:")
    width = max(len(k) for k in s.space)
    out += [f"  {k:<{width}}  {dim.describe()}" for k, dim in s.space.items()]
    count = f"{d.candidates:,}" if d.candidates is not None else "continuous (a float range without a step)"
    out.append(f"candidates: {count}")
    where = " (the other flags' ranges at their ends)" if d.at_ends else ""
    out.append(f"pruned by the plan before serving: {d.pruned_count:,} of {d.checked:,} checked candidates{where}")
    for g in d.pruned[:8]:
        shown = ", ".join(f"{k}={v}" for k, v in g.others.items()) or "every candidate"
        span = f"{g.values[0]}..{g.values[-1]}" if len(g.values) > 1 else str(g.values[0])
        out.append(f"  {shown}: max-num-seqs {span} ({len(g.values)} values): {g.reason}")
    if len(d.pruned) > 8:
        out.append(f"  ... and {len(d.pruned) - 8} more combinations")
    b = s.budget
    limits = [
        f"{b.server_starts} server starts" if b.server_starts else "",
        f"{b.gpu_minutes:g} GPU-minutes" if b.gpu_minutes else "",
    ]
    out.append(
        "budget: "
        + (" or ".join(x for x in limits if x) or "no limit")
        + f" (the rounds and the confirmation would start {budget_server_starts(s)} servers unbounded)"
    )
    out.append(
        f"search: {s.rounds} rounds x {s.per_round} candidates, Optuna TPE per scenario ({', '.join(s.scenarios)}), "
        f"seed {s.seed}; confirm the top {s.confirm_top} x {s.confirm_repeats} fresh starts against vLLM's defaults"
    )
    if d.accuracy_gated:
        near = s.accuracy_near_front_items or "each task's own limit"
        out.append(
            f"accuracy: {len(d.accuracy_gated)} served configuration(s) change what is served "
            f"({'; '.join(d.accuracy_gated)}): each screened on {s.accuracy_screen_items} items per task against "
            f"the baseline before its load, on {near} near the front before it may win"
        )
    out.append("dry run: nothing was served (worthit tune without --dry-run runs the rounds)")
    return out


def run_cli(a: Any) -> int:
    """``worthit tune [--dry-run] --config FILE``: without --dry-run, the dry run's checks, then the rounds."""
    try:
        source = str(a.config or ROOT / "config" / "config.yaml")
        cfg = load(source)
        hw = hardware_for(cfg, a.gpu, a.gpus)
        python = Study(cfg).python("serve")
        section = parse(cfg, source)
        accepted = flagsmod.accepted_flags(python) if section.space else ("", set())
        hub = bool(cfg["plan"]["hub_configs"]) and not a.no_hub
        given = parse_model_configs(a.model_config)
        d = dry_run(cfg, source=source, hw=hw, accepted=accepted, root=Path.cwd(), hub=hub, given=given)
    except InputError as e:
        return errors.report("worthit tune", e)
    print("\n".join(lines(d) if a.dry_run else lines(d)[:-1]), flush=True)
    if a.dry_run:
        return 0
    from worthit.tune.live import run_live

    return run_live(a, cfg, source=source, hw=hw, given=given, hub=hub)


def budget_server_starts(section: TuneSection) -> int:
    """Server starts the rounds and the confirmation would take, before the budget stops them: every
    candidate of every round once, then the top of each scenario and vLLM's defaults ``confirm.repeats``
    times each."""
    return section.rounds * section.per_round + section.confirm_starts
