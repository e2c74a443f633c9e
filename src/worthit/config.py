"""The study config: validation against config/schema.yaml, defaults, and the experiment grid.

JSON Schema is the single description of the config (every key has a description and a default);
this module fills the defaults in, turns schema violations into one-line errors that name the file,
the key and the allowed values, checks what a schema cannot (cross-references), and derives the grid
of variants x experiments that the rules expand (each experiment's own settings, the load levels among them, are
its folder's ``section.py``'s: :func:`worthit.experiments.loadtest.section.section`).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from worthit import engine_args as eargs
from worthit import measurements
from worthit import secrets as secretsmod
from worthit.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "config" / "schema.yaml"


class ConfigError(InputError):
    """The study config is invalid; the message says where and what is allowed."""


def _with_defaults(validator_class: Any) -> Any:
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: Mapping[str, Any], instance: Any, schema: Any) -> Any:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "$ref" in sub:
                    sub = validator._resolver.lookup(sub["$ref"]).contents
                if "default" in sub and prop not in instance:
                    instance[prop] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def load_schema() -> dict[str, Any]:
    """config/schema.yaml, parsed by libyaml where PyYAML has it (7x faster: this runs at every parse)."""
    schema: dict[str, Any] = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    # the experiments a variant may run, and the sections experiments outside this file declare
    variant = schema["properties"]["variants"]["additionalProperties"]["properties"]
    variant["experiments"]["items"]["enum"] = measurements.selectable()
    for key, section in measurements.sections().items():
        schema["properties"].setdefault(key, section)
    return schema


def _key(path: Any) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _allowed(err: jsonschema.ValidationError) -> str:
    s = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "enum":
        return "allowed: " + ", ".join(map(str, s["enum"]))
    if err.validator == "additionalProperties":
        props = sorted((s.get("properties") or {}).keys())
        return "allowed keys: " + ", ".join(props) if props else ""
    if err.validator == "required":
        return "add it to the file"
    if err.validator in ("minimum", "exclusiveMinimum", "maximum", "type", "pattern", "minItems"):
        desc = s.get("description", "")
        return f"expected {err.validator} {err.validator_value!r}" + (f" ({desc})" if desc else "")
    return str(s.get("description", ""))


def validate(config: Mapping[str, Any], source: str = "config") -> dict[str, Any]:
    """Validate, fill defaults, check cross-references (:mod:`worthit.config_checks`); return a new dict."""
    from worthit import config_checks as checks  # it imports ConfigError from here

    cfg = copy.deepcopy(dict(config))
    schema = load_schema()
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [
            f"{source}: key '{_key(e.absolute_path)}': {e.message}" + (f" ({_allowed(e)})" if _allowed(e) else "")
            for e in errors[:10]
        ]
        raise ConfigError("invalid study config\n  " + "\n  ".join(lines))
    try:  # a key or token written in the config would be written wherever the config is
        secretsmod.refuse_in_config(cfg, source)
    except secretsmod.SecretError as e:
        raise ConfigError(str(e)) from None
    models = sorted(cfg["models"])
    for name, v in cfg["variants"].items():
        if v["model"] not in cfg["models"]:
            raise ConfigError(
                f"{source}: key 'variants.{name}.model': unknown model {v['model']!r} (allowed: {', '.join(models)})"
            )
    base = cfg.get("baseline_variant")
    if base is None:
        cfg["baseline_variant"] = next(iter(cfg["variants"]))
    elif base not in cfg["variants"]:
        raise ConfigError(
            f"{source}: key 'baseline_variant': unknown variant {base!r} (allowed: {', '.join(cfg['variants'])})"
        )
    for name, v in cfg["variants"].items():
        vb = v.get("baseline")
        if vb is not None and vb not in cfg["variants"]:
            raise ConfigError(
                f"{source}: key 'variants.{name}.baseline': unknown variant {vb!r} (allowed: "
                f"{', '.join(cfg['variants'])}, its own name for a baseline of its own, or leave it out for "
                "baseline_variant)"
            )
    checks.quantize_bases(cfg, source)
    checks.named_once(cfg, source)
    checks.engine_args(cfg, source)
    checks.specdec(cfg, source)
    _check_workloads(cfg, source)
    from worthit.experiments.specdec.real_text import add_real_text_levels  # its levels reach every rule

    if add_real_text_levels(cfg, source):  # speculative variants without a real-text level get ShareGPT ones
        _check_workloads(cfg, source)
    checks.sweet_spot(cfg, source)
    return cfg


def _check_workloads(cfg: Mapping[str, Any], source: str) -> None:
    """Every workload a variant or level names exists (and fits the level); files are read and checked."""
    names = sorted(cfg["workloads"])
    allowed = f"allowed: {', '.join(names)}" if names else "no workloads are defined: add them under 'workloads'"
    lt = cfg["loadtest"]
    refs = [("loadtest.workload", lt["workload"])]
    refs += [(f"variants.{v}.workload", spec.get("workload")) for v, spec in cfg["variants"].items()]
    refs += [(f"loadtest.workload_levels[{i}].workload", lv["workload"]) for i, lv in enumerate(lt["workload_levels"])]
    for key, name in refs:
        if name is not None and name not in cfg["workloads"]:
            raise ConfigError(f"{source}: key '{key}': unknown workload {name!r} ({allowed})")
    for i, lv in enumerate(lt["workload_levels"]):
        for name in lv.get("variants") or []:
            if name not in cfg["variants"]:
                raise ConfigError(
                    f"{source}: key 'loadtest.workload_levels[{i}].variants': unknown variant {name!r} "
                    f"(allowed: {', '.join(cfg['variants'])})"
                )
        kind = cfg["workloads"][lv["workload"]]["kind"]
        if lv.get("replay") and kind != "trace":
            raise ConfigError(
                f"{source}: key 'loadtest.workload_levels[{i}].replay': workload {lv['workload']!r} is a {kind} "
                "workload; only a trace has arrival times to replay (allowed: a concurrency or a rate)"
            )
    if cfg["workloads"]:
        from worthit.loadgen.prompts import WorkloadError  # imported only when a study defines workloads
        from worthit.loadgen.workloads import from_config

        for name, spec in cfg["workloads"].items():
            try:
                from_config(name, spec, defaults=lt, source=source)
            except WorkloadError as e:
                raise ConfigError(str(e)) from None


class _DuplicateKey(yaml.YAMLError):  # type: ignore[misc]  # (PyYAML ships no types)
    pass


class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc]
    """YAML's safe loader, refusing a key that appears twice in one mapping: YAML keeps the last silently,
    so a variant block copied and left under the same name would replace the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(
                        f"line {line}: key {key!r} appears twice in one mapping (first on line {seen[key]}); YAML "
                        "would keep the last silently: rename one or remove it"
                    )
                seen[key] = line
            except TypeError:  # an unhashable key: YAML's own constructor says what is wrong with it
                pass
        return dict(super().construct_mapping(node, deep=deep))


def read_yaml(path: str | Path) -> Any:
    """A study config's YAML (:class:`_UniqueKeyLoader`); a ConfigError naming the file when it is not valid
    YAML, has a duplicated key, or cannot be read."""
    path = Path(path)
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 (a safe loader)
    except _DuplicateKey as e:
        raise ConfigError(f"{path}: {e}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    except (OSError, UnicodeDecodeError) as e:  # missing, a folder, unreadable, not text
        raise ConfigError(f"{path}: the study config cannot be read ({e})") from None


def load(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    raw = read_yaml(path) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return validate(raw, str(path))


def config_hash(cfg: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Variant:
    name: str
    model: str
    engine_args: dict[str, Any]
    extra_args: list[str]
    env: dict[str, str]
    gpus: int
    experiments: list[str]
    description: str = ""
    # the card whose KV pool the server gets (GiB; worthit.plan.emulate), None: this machine's own
    emulate_gpu_memory_gib: float | None = None

    @property
    def served_dtype(self) -> str | None:
        d = self.engine_args.get("dtype")
        return str(d) if d else None

    def arg(self, flag: str) -> Any:
        """An engine argument by its flag name, however the config spells it (see :mod:`worthit.engine_args`)."""
        return eargs.get(self.engine_args, flag)

    @property
    def speculative_config(self) -> dict[str, Any] | None:
        return eargs.speculative_config(self.engine_args)

    @property
    def prefix_caching(self) -> bool:
        """vLLM's automatic prefix caching: on unless the variant turns it off."""
        return eargs.prefix_caching_on(self.engine_args)


def emulated_gib(cfg: Mapping[str, Any], variant: str) -> float | None:
    """The card size whose KV pool ``variant`` is served with: its own ``emulate_gpu_memory_gib`` when it sets
    one (null: none), else serve's; None: the machine's own pool."""
    v = cfg["variants"][variant]
    gib = (
        v["emulate_gpu_memory_gib"]
        if "emulate_gpu_memory_gib" in v
        else (cfg.get("serve") or {}).get("emulate_gpu_memory_gib")
    )
    return None if gib is None else float(gib)


class Study:
    """Typed access to a validated config and the grid of variants x experiments the rules expand (an
    experiment's own settings and levels: its ``section.py``, e.g. the load levels'
    :func:`worthit.experiments.loadtest.section.section`)."""

    def __init__(self, cfg: Mapping[str, Any], root: Path = ROOT) -> None:
        self.cfg = cfg
        self.root = root

    @property
    def name(self) -> str:
        return str(self.cfg["study"])

    def python(self, stage: str) -> str:
        p = Path(self.cfg["envs"][f"{stage}_python"])
        return str(p if p.is_absolute() or "/" not in str(p) else self.root / p)

    def variant(self, name: str) -> Variant:
        v = self.cfg["variants"][name]
        serve = self.cfg["serve"]
        return Variant(
            name=name,
            model=v["model"],
            engine_args=eargs.merged(serve["engine_args"], v["engine_args"]),
            extra_args=list(v["extra_args"]),
            env={k: str(x) for k, x in {**serve["env"], **v["env"]}.items()},
            gpus=int(v["gpus"]),
            experiments=list(v["experiments"]),
            description=v.get("description", ""),
            emulate_gpu_memory_gib=emulated_gib(self.cfg, name),
        )

    @property
    def api_key_source(self) -> dict[str, str | None] | None:
        """Where the servers' API key comes from, for a serve spec (worthit.secrets.key_source); None for the
        default (the VLLM_API_KEY variable), which leaves the specs of studies without a key as they were."""
        src = secretsmod.key_source(self.cfg.get("serve"))
        return None if src == secretsmod.key_source({}) else src

    @property
    def api_key(self) -> str | None:
        """The servers' API key, read now from where the study names it (None: the servers take none)."""
        return secretsmod.study_key(self.cfg)

    @property
    def variants(self) -> list[str]:
        return list(self.cfg["variants"])

    def baseline_of(self, name: str) -> str:
        """The variant ``name`` is judged against: its own ``baseline:``, else ``baseline_variant``; ``name``
        itself for the study's baseline and for a baseline of its own (``baseline: <its name>``)."""
        return str(self.cfg["variants"][name].get("baseline") or self.cfg["baseline_variant"])

    @property
    def baselines(self) -> list[str]:
        """The variants judged against nothing: ``baseline_variant`` and every variant whose ``baseline:`` is its
        own name (another model's or machine's reference, which other variants name as theirs)."""
        return [v for v in self.variants if self.baseline_of(v) == v]

    def changes(self, name: str) -> list[str]:
        """What variant ``name`` changes against the variant it is judged against (:meth:`baseline_of`), one
        entry per change: its model, each engine argument (flags compared in any spelling, prefix caching on or
        off as one change), its extra arguments, its environment. One entry is a comparison that isolates one
        change; more, a comparison whose effect no row can split between them (docs/verdicts.md). Empty for the
        baseline and for a control (the baseline's configuration measured again)."""
        base = self.baseline_of(name)
        if base == name:
            return []
        a, b = self.variant(base), self.variant(name)
        out: list[str] = []
        if a.model != b.model:
            out.append(f"model {b.model} (vs {a.model})")
        if a.prefix_caching != b.prefix_caching:
            on = {True: "on", False: "off"}
            out.append(f"prefix caching {on[b.prefix_caching]} (vs {on[a.prefix_caching]})")
        skip = {eargs.PREFIX_CACHING, eargs.NO_PREFIX_CACHING}
        for key in sorted({eargs.flag(k) for k in (*a.engine_args, *b.engine_args)} - skip):
            va, vb = eargs.get(a.engine_args, key), eargs.get(b.engine_args, key)
            if va != vb:
                out.append(f"{key} {vb} (vs {va})")
        if a.extra_args != b.extra_args:
            out.append(f"extra arguments {b.extra_args} (vs {a.extra_args})")
        for key in sorted({*a.env, *b.env}):
            if a.env.get(key) != b.env.get(key):
                out.append(f"environment {key}={b.env.get(key)} (vs {a.env.get(key)})")
        return out

    def variants_with(self, experiment: str) -> list[str]:
        return [v for v in self.variants if experiment in self.variant(v).experiments]

    def consumers(self, variant: str) -> Iterator[str]:
        """The variant's measurements in the order they run on its server (one at a time): every
        experiment's (worthit.measurements), in the experiments' order."""
        for m in measurements.registered():
            yield from m.consumers(self, variant)

    def result_files(self, variant: str) -> list[str]:
        """Every result file of the variant below its folder, without .parquet: the measurements and what
        they write beside them (a load run's timeline, accuracy's samples)."""
        return [
            f for m in measurements.registered() for f in (*m.consumers(self, variant), *m.side_results(self, variant))
        ]


def check_gpu_budget(study: Study, available: int | None, source: str = "config") -> None:
    """Refuse, before anything runs, a variant that needs more GPUs than the run may use.

    ``available`` is the ``gpu`` resource the run was given (``snakemake --resources gpu=N``); None means the
    user set no limit (a cluster profile, or a machine where Snakemake decides) and nothing is checked."""
    if available is None:
        return
    for name in study.variants:
        need = study.variant(name).gpus
        if need > available:
            raise ConfigError(
                f"{source}: key 'variants.{name}.gpus': the variant needs {need} GPU(s) but this run may use "
                f"{available} (--resources gpu={available}); raise --resources gpu to at least {need} on a "
                f"machine with that many GPUs, or lower 'gpus' (and tensor/data-parallel-size) for '{name}'"
            )
