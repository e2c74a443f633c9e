"""What every report stage reads: the typed study, its results, the rules, and how each variant is judged.

Each variant other than the baseline is one *optimisation*, named as the user turns it on and oriented so
that ``with_`` is the side that has it: a variant that turns a cache off is "<the cache> (on vs off)" with
the baseline as the side that has it, and "adopt" means keep it on. Each experiment names the changes of its
own engine flags (:func:`worthit.report.experiments.changes`); the flags no experiment names are named here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from worthit import engine_args as eargs
from worthit import measurements
from worthit.config import Study
from worthit.metrics import Slo
from worthit.provenance import machine
from worthit.report.data import StudyResults
from worthit.report.mbu import Bandwidth, peak_bandwidth
from worthit.report.rules import Rules

# Engine arguments that change what the model computes: a variant setting one of them differently needs an
# accuracy measurement before it can be adopted. Everything else (caching a prompt, speculative decoding with
# its exact rejection sampling, batch and memory limits, compilation) leaves the outputs as they were.
LOSSY_FLAGS = ("kv-cache-dtype", "quantization", "dtype", "calculate-kv-scales")
# Flags whose difference the name of an optimisation leaves out (how much memory and context the engine gets,
# not what it runs). --enforce-eager is not among them: it turns CUDA graphs (and compilation) off.
_QUIET_FLAGS = ("gpu-memory-utilization", "max-model-len", "kv-cache-memory-bytes")


def _flag_change(key: str, without: Any, with_: Any) -> str:
    """One engine flag's difference in an optimisation's name: a switch reads as the command line writes it
    (``--enforce-eager (vs unset)``), a value with the other side's beside it."""
    if with_ is True and without in (None, False):
        return f"--{key} (vs unset)"
    if without is True and with_ in (None, False):
        return f"no --{key} (vs --{key})"
    return f"--{key} {with_ if with_ is not None else '(unset)'} (vs {without if without is not None else 'unset'})"


@dataclass(frozen=True)
class Pair:
    """One optimisation: the variant it comes from, its name, and which side has it."""

    variant: str
    optimisation: str
    without: str
    with_: str
    lossless: bool
    base: str = ""  # the variant it is judged against (variants.<v>.baseline, else baseline_variant)
    control: bool = False  # the base's own configuration measured again: how far two measurements differ
    # its effect depends on what is generated (speculative decoding, every method): judged on real text
    content_dependent: bool = False

    @property
    def inverted(self) -> bool:
        """The variant is the side without the optimisation (it turns off a default)."""
        return self.with_ != self.variant


def _model_source(cfg: Mapping[str, Any], model: str) -> str:
    return str(((cfg.get("models") or {}).get(model) or {}).get("source") or "")


def _model_name(cfg: Mapping[str, Any], model: str) -> str:
    """The model in an optimisation's name, as the experiment that made it says it (a quantised checkpoint)."""
    from worthit.report.experiments import model_name  # they register against this module

    return model_name(cfg, model)


def _matched(ta: Mapping[str, Any], tb: Mapping[str, Any]) -> set[str]:
    """The machines of the results two sides share (result -> hardware stamp), when each shared result was
    measured on one machine for both (else the empty set)."""
    pairs = [(machine(ta[k]), machine(tb[k])) for k in ta.keys() & tb.keys()]
    if not pairs or any(x is None or x != y for x, y in pairs):
        return set()
    return {x for x, _ in pairs if x}


@dataclass
class Context:
    """The study, its results and the rules; the analyses of each experiment are added as they run."""

    study: Study
    results: StudyResults
    rules: Rules
    slo: Slo
    analyses: dict[str, Any] = field(default_factory=dict)
    _random: dict[str, bool] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, study: Study, results: StudyResults) -> Context:
        cfg = study.cfg
        slo = Slo.from_config(cfg.get("slo"))
        return cls(study, results, Rules.from_config(cfg), slo)

    # --- variants --------------------------------------------------------------------------------
    @property
    def baseline(self) -> str:
        return str(self.study.cfg.get("baseline_variant") or (self.variants[0] if self.variants else ""))

    @property
    def variants(self) -> list[str]:
        """The config's variants in order, then any the results hold that the config no longer names."""
        return list(dict.fromkeys([*self.study.variants, *self.results.variants]))

    @property
    def others(self) -> list[str]:
        """The variants judged against another: all but the study's baseline and the baselines of their own."""
        judged_against_nothing = {self.baseline, *self.study.baselines}
        return [v for v in self.variants if v not in judged_against_nothing]

    def configured(self, variant: str) -> bool:
        return variant in self.study.variants

    def engine_args(self, variant: str) -> dict[str, Any]:
        """The variant's engine arguments (serve defaults + its own), else those its results were served with."""
        if self.configured(variant):
            return dict(self.study.variant(variant).engine_args)
        return dict(self.results.variant(variant).provenance().get("engine_args") or {})

    def extra_args(self, variant: str) -> list[str]:
        return list(self.study.variant(variant).extra_args) if self.configured(variant) else []

    def description(self, variant: str) -> str:
        return self.study.variant(variant).description if self.configured(variant) else ""

    def model(self, variant: str) -> str:
        if self.configured(variant):
            return self.study.variant(variant).model
        return str((self.results.variant(variant).provenance().get("model") or {}).get("name") or "")

    def model_source(self, variant: str) -> str:
        return _model_source(self.study.cfg, self.model(variant))

    def random_weights(self, variant: str) -> bool:
        """Whether the variant's model manifest says its weights are random (performance-only models): the
        ``weights`` of the model in its results' provenance (:func:`worthit.provenance.stamp`)."""
        if variant not in self._random:
            self._random[variant] = any(
                (f.metadata.get("model") or {}).get("weights") == "random"
                or (f.metadata.get("model") or {}).get("random_weights")
                for f in self.results.variant(variant).files
            )
        return self._random[variant]

    def base_of(self, variant: str) -> str:
        """The variant ``variant`` is judged against (its ``baseline:``, else the study's baseline)."""
        return self.study.baseline_of(variant) if self.configured(variant) else self.baseline

    def env(self, variant: str) -> dict[str, str]:
        return dict(self.study.variant(variant).env) if self.configured(variant) else {}

    def _timed(self, variant: str) -> dict[str, dict[str, Any] | None]:
        """The variant's results whose figures a machine sets (every table but those the experiments declare
        machine-free, such as item scores), by result (``load/conc~64.rep~3``), with their ``hardware`` stamp."""
        free = measurements.machine_free_tables()
        return {
            f.experiment: f.metadata.get("hardware")
            for f in self.results.variant(variant).files
            if f.ok and f.table not in free
        }

    def machines(self, variant: str) -> set[str]:
        """The machines (worthit.provenance.machine) that measured the variant's timed results."""
        return {m for m in map(machine, self._timed(variant).values()) if m}

    def same_machine(self, a: str, b: str) -> bool | None:
        """Whether one machine measured both variants' timed results: True, False, or None when the results
        cannot tell (a GPU result without GPU UUIDs names only its host, which lent and cloud machines share;
        results made before worthit recorded the UUIDs).

        True also when the sides span machines but every result they share was measured on one machine for
        both (a study resumed elsewhere: run 3 of a level of both sides on the second machine): each level
        then pools the same machines on both sides, so the machines' difference is inside both intervals,
        not between them (:meth:`matched_machines` says so in the report)."""
        ta, tb = self._timed(a), self._timed(b)
        hws = [hw for hw in (*ta.values(), *tb.values()) if hw]
        found = {machine(hw) for hw in hws}
        if not found:
            return None
        weak = any(hw.get("gpu") and not hw.get("gpu_uuids") for hw in hws)
        if len(found) > 1 and not _matched(ta, tb):
            return False
        return None if weak else True

    def matched_machines(self, a: str, b: str) -> set[str]:
        """The machines of the timed results ``a`` and ``b`` share, when each of them was measured on one
        machine for both sides (else the empty set)."""
        return _matched(self._timed(a), self._timed(b))

    def label(self, variant: str) -> str:
        """The variant's name as every table shows it: random weights said wherever its numbers appear."""
        return f"{variant} (random weights)" if self.random_weights(variant) else variant

    # --- optimisations ---------------------------------------------------------------------------
    def pair(self, variant: str) -> Pair:
        """Name the optimisation ``variant`` applies to its baseline, and orient it (see module doc). A
        variant that changes nothing (same model, engine arguments, extra arguments and environment) is a
        *control*: the baseline's configuration measured again, on another machine or another day."""
        base = self.base_of(variant)
        a, b = self.engine_args(base), self.engine_args(variant)
        parts: list[str] = []
        with_ = variant
        lossless = True
        from worthit.report.experiments import changes, helper_of  # they register against this module

        named, named_flags = changes(a, b)  # each experiment names what its own flags change
        for c in named:
            parts.append(c.name)
            if c.baseline_has_it:
                with_ = base
        asyncs = (eargs.ASYNC_SCHEDULING, eargs.NO_ASYNC_SCHEDULING)
        explicit_async = any(eargs.has(x, f) for x in (a, b) for f in asyncs)
        if explicit_async and eargs.async_scheduling_on(a) != eargs.async_scheduling_on(b):
            parts.append("async scheduling (on vs off)")  # lossless: when a step is planned, not what it computes
            if eargs.async_scheduling_on(a):
                with_ = base
        ma, mb = self.model(base), self.model(variant)
        if ma != mb:
            parts.append(_model_name(self.study.cfg, mb) + f" (vs {ma})")
            lossless = False
        skip = {*named_flags, *_QUIET_FLAGS}
        skip |= set(asyncs)
        for key in sorted({eargs.flag(k) for k in (*a, *b)} - skip):
            va, vb = eargs.get(a, key), eargs.get(b, key)
            if va == vb:
                continue
            if key in LOSSY_FLAGS:
                lossless = False
            if key == "kv-cache-dtype":
                parts.append(f"{str(vb or 'auto').upper()} KV cache (vs {va or 'auto'})")
            else:
                parts.append(_flag_change(key, va, vb))
        control = (
            ma == mb
            and all(eargs.get(a, k) == eargs.get(b, k) for k in {eargs.flag(k) for k in (*a, *b)})
            and self.extra_args(base) == self.extra_args(variant)
            and self.env(base) == self.env(variant)
        )
        if control:
            name = f"control: {base}'s configuration measured again"
        else:
            name = "; ".join(parts) or f"{variant} (same engine arguments as {base})"
        helper = helper_of(self, variant)
        if helper is not None:  # judged as what it also is (another model), but named for what it is for
            name += f" [{helper.of}]"
        without = variant if with_ == base else base
        dependent = any(c.content_dependent for c in named)
        return Pair(variant, name, without, with_, lossless, base, control, content_dependent=dependent)

    # --- hardware --------------------------------------------------------------------------------
    @property
    def bandwidth(self) -> Bandwidth | None:
        hw = self.study.cfg.get("hardware") or {}
        gpu = hw.get("gpu")
        if not gpu:
            for f in self.results.all_files():
                gpu = (f.metadata.get("hardware") or {}).get("gpu")
                if gpu:
                    break
        return peak_bandwidth(gpu, hw.get("peak_bandwidth_gb_s"))
