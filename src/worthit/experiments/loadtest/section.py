"""The ``loadtest:`` section of a study config as typed values, read through one door (:func:`section`), as the
prefix, sweet-spot and speculative-decoding sections are; and the load levels it gives each variant, in the
order they are measured. Keys, bounds and defaults are written once, in this folder's ``section.yaml``; a config
the schema has not filled yet takes the defaults from there.

Which levels a variant measures and what each sends is decided by more than this section: each variant's
``levels:`` (its own grid concurrencies), ``workload:`` and whether ``loadtest`` is among its experiments, and the
study's named ``workloads``. The section reads those too, so that every question about a study's load levels
(the rules' targets, the measurement, the plan, the speculative-decoding checks) has one answer, here."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit.config import ConfigError
from worthit.loadgen.levels import CONC, RATE, REPLAY, LoadLevel, parse_level

SECTION_FILE = Path(__file__).with_name("section.yaml")
NAME = "loadtest"


@dataclass(frozen=True)
class WorkloadLevel:
    """A level of ``loadtest.workload_levels``: one that sends a workload of its own."""

    level: LoadLevel
    variants: tuple[str, ...] | None  # the variants that measure it; None: every load-tested variant
    added: str | None = None  # why worthit added it (real_text_for_speculative); None: the study's own


@dataclass(frozen=True)
class VariantLoad:
    """What a variant's own config says of its load levels."""

    load_tested: bool  # ``loadtest`` is among its experiments: it measures the grid
    levels: tuple[int, ...] | None  # its own grid concurrencies (None: loadtest.levels)
    workload: str | None  # the workload its grid sends (None: loadtest.workload)


@dataclass(frozen=True)
class LoadtestSection:
    """The load test's settings (each key's meaning: section.yaml) and the load levels they give each variant."""

    endpoint: str
    prompt_tokens: int
    output_tokens: int
    levels: tuple[int, ...]
    num_requests_min: int
    num_requests_per_concurrency: int
    warmup_requests: int
    request_timeout_s: float
    seed: int
    workload: str | None
    rates: tuple[float, ...]
    workload_levels: tuple[WorkloadLevel, ...]
    real_text_for_speculative: bool
    real_text_for_speculative_reason: str | None
    arrival: Mapping[str, Any]
    rate_duration_s: float
    max_concurrency: int | None
    rate_tolerance: float
    max_queue_delay_ms: float
    timeline_interval_s: float | None  # None: no timeline
    repeats: int
    variants: Mapping[str, VariantLoad]  # every variant of the study, in the config's order
    workloads: Mapping[str, Mapping[str, Any]]  # the study's named workloads, as the config writes them

    @property
    def tokens_per_request(self) -> int:
        """A random-token request's prompt and output."""
        return self.prompt_tokens + self.output_tokens

    @property
    def open_loop(self) -> dict[str, Any]:
        """What an open-loop level's schedule and its delivery check read (the measurement's ``open_loop``)."""
        return {
            "arrival": dict(self.arrival),
            "max_concurrency": self.max_concurrency,
            "rate_tolerance": self.rate_tolerance,
            "max_queue_delay_ms": self.max_queue_delay_ms,
        }

    def grid_levels(self, variant: str) -> list[int]:
        """The closed-loop concurrencies of ``variant``'s load grid: its own ``levels:``, else loadtest.levels."""
        return list(self.variants[variant].levels or self.levels)

    @property
    def all_grid_levels(self) -> list[int]:
        """Every variant's grid concurrencies: loadtest.levels, then those only a variant's ``levels:`` names."""
        out = list(self.levels)
        for v in self.variants:
            out += [c for c in self.grid_levels(v) if c not in out]
        return out

    def num_requests(self, concurrency: int) -> int:
        """Requests a closed-loop level at ``concurrency`` sends: max(min, per_concurrency x concurrency)."""
        return max(self.num_requests_min, self.num_requests_per_concurrency * concurrency)

    @functools.cached_property
    def load_levels(self) -> tuple[LoadLevel, ...]:
        """Every load level in the order measured: concurrencies, rates, then the levels naming a workload."""
        grid = [LoadLevel(CONC, c) for c in self.all_grid_levels] + [LoadLevel(RATE, r) for r in self.rates]
        return (*grid, *(wl.level for wl in self.workload_levels))

    def variant_levels(self, variant: str) -> list[LoadLevel]:
        """The load levels ``variant`` measures: with loadtest in its experiments, the concurrencies, rates and
        every workload level that names no variants or names it; without, only the workload levels naming it."""
        grid = self.variants[variant].load_tested
        n_plain = len(self.load_levels) - len(self.workload_levels)
        own = set(self.grid_levels(variant))
        out = [lv for lv in self.load_levels[:n_plain] if lv.kind != CONC or lv.concurrency in own] if grid else []
        for wl in self.workload_levels:
            if (wl.variants is None and grid) or (wl.variants is not None and variant in wl.variants):
                out.append(wl.level)
        return out

    @property
    def load_tested(self) -> list[str]:
        """Variants that measure at least one load level."""
        return [v for v in self.variants if self.variant_levels(v)]

    def level_runs(self, variant: str) -> list[tuple[LoadLevel, int]]:
        """(level, run) of ``variant`` in the order they are measured: every level once, then again per repeat."""
        levels = self.variant_levels(variant)
        return [(lv, r) for r in range(1, self.repeats + 1) for lv in levels]

    def level(self, name: str) -> LoadLevel:
        """A level of this study by its name (the loadtest rule's {level} wildcard: conc~4, rate~2.5, ...)."""
        lv = parse_level(name)
        if lv not in self.load_levels:
            known = ", ".join(x.name for x in self.load_levels)
            raise ConfigError(f"load level {name!r} is not part of the study (its levels: {known})")
        return lv

    def workload_name(self, variant: str, level: LoadLevel) -> str | None:
        """The workload a level of ``variant`` sends: the level's own, the variant's, the study's (None: the
        fixed-length random prompts)."""
        return level.workload or self.variants[variant].workload or self.workload

    def workload_files(self, variant: str, level: LoadLevel) -> list[str]:
        """Files the level's workload reads (a jsonl or trace workload's path), as the config names them."""
        name = self.workload_name(variant, level)
        spec = self.workloads.get(name) if name else None
        return [str(spec["path"])] if spec and spec.get("path") else []

    def level_requests(self, level: LoadLevel) -> int:
        """Requests a level sends (a replay level: the whole trace, 0 here)."""
        if level.kind == CONC:
            return self.num_requests(int(level.concurrency or 1))
        if level.kind == RATE:
            return max(self.num_requests_min, round(float(level.rate_per_s or 0) * self.rate_duration_s))
        return 0

    def timeline_files(self, variant: str) -> list[str]:
        """The variant's server timelines below its folder, without .parquet (one per load run; none when
        loadtest.timeline_interval_s is null or the variant runs no load levels)."""
        if not self.timeline_interval_s:
            return []
        return [lv.timeline_path(r) for lv, r in self.level_runs(variant)]


def run_of(rep_wildcard: str) -> int:
    """The run number from the loadtest rule's {rep} wildcard ('' is run 1, '.rep~3' is run 3)."""
    return int(rep_wildcard.removeprefix(".rep~")) if rep_wildcard else 1


def _workload_level(spec: Mapping[str, Any]) -> WorkloadLevel:
    if spec.get("replay"):
        level = LoadLevel(REPLAY, None, spec["workload"])
    else:
        kind = CONC if spec.get("concurrency") is not None else RATE
        level = LoadLevel(kind, spec.get("concurrency") or float(spec["rate"]), spec["workload"])
    names = spec.get("variants")
    added = spec.get("added")
    return WorkloadLevel(level, None if names is None else tuple(names), None if added is None else str(added))


def _variant_load(spec: Mapping[str, Any]) -> VariantLoad:
    own = spec.get("levels")
    # a variant that does not say takes the schema's default experiments, [kv, loadtest]
    return VariantLoad(
        load_tested=NAME in spec.get("experiments", [NAME]),
        levels=tuple(int(c) for c in own) if own else None,
        workload=spec.get("workload"),
    )


def section(cfg: Mapping[str, Any]) -> LoadtestSection:
    """The ``loadtest:`` section of ``cfg`` with its variants' load settings and its workloads (validated or
    not: a key of the section it leaves out takes its default)."""
    from worthit.measurements import section_defaults

    d = {**section_defaults(SECTION_FILE), **dict(cfg.get(NAME) or {})}
    n, arrival = _filled(d, "num_requests"), _filled(d, "arrival")
    timeline = d.get("timeline_interval_s")
    max_conc = d.get("max_concurrency")
    reason = d.get("real_text_for_speculative_reason")
    return LoadtestSection(
        endpoint=str(d["endpoint"]),
        prompt_tokens=int(d["prompt_tokens"]),
        output_tokens=int(d["output_tokens"]),
        levels=tuple(int(c) for c in d["levels"]),
        num_requests_min=int(n["min"]),
        num_requests_per_concurrency=int(n["per_concurrency"]),
        warmup_requests=int(d["warmup_requests"]),
        request_timeout_s=float(d["request_timeout_s"]),
        seed=int(d["seed"]),
        workload=d.get("workload"),
        rates=tuple(float(r) for r in d["rates"]),
        workload_levels=tuple(_workload_level(lv) for lv in d["workload_levels"]),
        real_text_for_speculative=bool(d["real_text_for_speculative"]),
        real_text_for_speculative_reason=None if reason is None else str(reason),
        arrival=arrival,
        rate_duration_s=float(d["rate_duration_s"]),
        max_concurrency=None if max_conc is None else int(max_conc),
        rate_tolerance=float(d["rate_tolerance"]),
        max_queue_delay_ms=float(d["max_queue_delay_ms"]),
        timeline_interval_s=float(timeline) if timeline else None,
        repeats=int(d["repeats"]),
        variants={str(v): _variant_load(spec) for v, spec in (cfg.get("variants") or {}).items()},
        workloads=dict(cfg.get("workloads") or {}),
    )


@functools.cache
def _nested_defaults(key: str) -> Mapping[str, Any]:
    """The defaults of an object key of the section (num_requests, arrival), key by key."""
    from worthit.measurements import section_file

    _, schema = section_file(SECTION_FILE)
    props = schema["properties"][key].get("properties") or {}
    return {str(k): p["default"] for k, p in props.items() if "default" in p}


def _filled(d: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The object key ``key`` of the section as written, a key it leaves out added with its default (as the
    schema's validation adds it)."""
    out = dict(d.get(key) or {})
    for k, default in _nested_defaults(key).items():
        out.setdefault(k, default)
    return out
