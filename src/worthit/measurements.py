"""The experiments' measurement side as a registry: what each experiment measures on a variant's server.

A :class:`Measurement` declares, in one place, everything the workflow and the config need to know about
an experiment:

- ``name``: the experiment's key; with ``selectable`` it is a value of ``variants.<v>.experiments``;
- ``consumers(study, variant)``: its measurements of that variant, each a result file below the variant's
  folder (``results/<study>/variant~<v>/<consumer>.parquet``) and a turn on the variant's server; the study
  runs the measurements of all experiments in ``order`` (:meth:`worthit.config.Study.consumers`);
- ``side_results(study, variant)``: further result files its measurements write beside them (the report
  reads them too);
- ``rules``: its rule file, included by the ``Snakefile`` (a path relative to ``workflow/rules/``, or
  absolute);
- ``outputs(study, results)``: study-level files of its own the default target builds (its aggregate);
- ``section``: its config section (key, JSON schema with defaults and descriptions) when
  ``config/schema.yaml`` does not hold it;
- ``tables``: its Parquet tables (:class:`worthit.schemas.Table`), added to the schema module's index;
- ``levels``: the table of its load levels' requests, the files the report reads as a variant's levels.
- ``machine_free``: its tables whose figures no machine sets (item scores), left out of which machine
  measured a variant.

The report side (analysis, evidence for the decision layer, tables, figures) is the report's registry,
:mod:`worthit.report.experiments`. An experiment outside this package is a module that registers both and is
named in ``WORTHIT_EXPERIMENTS`` (comma-separated module names) or declared as an entry point of group
``worthit.experiments``; docs/architecture.md, "Adding an experiment", walks through one, and
tests/workflow/test_experiment_registry.py adds a toy experiment this way and touches no other file.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from worthit import schemas
from worthit.schemas import Table

if TYPE_CHECKING:
    from worthit.config import Study

PLUGINS_ENV = "WORTHIT_EXPERIMENTS"
ENTRY_POINT_GROUP = "worthit.experiments"


def no_consumers(_study: Study, _variant_or_results: str) -> list[str]:
    """No result file: for a stage that takes no turn on a variant's server (quantize, deploy)."""
    return []


@dataclass(frozen=True)
class Measurement:
    name: str
    consumers: Callable[[Study, str], Sequence[str]]
    rules: str
    order: int = 50
    selectable: bool = True
    side_results: Callable[[Study, str], Sequence[str]] = no_consumers
    outputs: Callable[[Study, str], Sequence[str]] = no_consumers
    section: tuple[str, dict[str, Any]] | None = None
    tables: Sequence[Table] = field(default_factory=tuple)
    levels: Table | None = None
    machine_free: Sequence[Table] = field(default_factory=tuple)


REGISTRY: dict[str, Measurement] = {}


def register(m: Measurement) -> Measurement:
    """Add (or replace) an experiment's measurement side; its tables join the schema module's index."""
    for t in m.tables:
        schemas.register(t)
    REGISTRY[m.name] = m
    return m


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def registered() -> list[Measurement]:
    """Every experiment's measurement side, in turn order."""
    load_plugins()
    return sorted(REGISTRY.values(), key=lambda m: (m.order, m.name))


def level_tables() -> set[str]:
    """The tables whose files are a variant's load levels (the report's VariantResults.levels)."""
    return {m.levels.name for m in registered() if m.levels is not None}


def machine_free_tables() -> set[str]:
    """The tables whose figures no machine sets (the report's "one machine measured both sides" leaves them out)."""
    return {t.name for m in registered() for t in m.machine_free}


def selectable() -> list[str]:
    """The values ``variants.<v>.experiments`` allows."""
    return [m.name for m in registered() if m.selectable]


def sections() -> dict[str, dict[str, Any]]:
    """Config sections the experiments declare (key -> JSON schema)."""
    return {m.section[0]: m.section[1] for m in registered() if m.section}


_loaded: set[str] = set()
_entry_points_read = False


def load_plugins() -> None:
    """Import the experiments named in WORTHIT_EXPERIMENTS and the installed entry points (once each; the
    installed distributions are scanned once per process: it is called at every turn of the study grid)."""
    global _entry_points_read
    from worthit.experiments import register_builtin

    register_builtin()
    names = [n.strip() for n in os.environ.get(PLUGINS_ENV, "").split(",") if n.strip()]
    for name in names:
        if name not in _loaded:
            _loaded.add(name)
            try:
                importlib.import_module(name)
            except ImportError as e:
                raise ImportError(
                    f"{PLUGINS_ENV} names experiment module {name!r}, which cannot be imported ({e}); put its "
                    "folder on PYTHONPATH or remove it from the variable"
                ) from e
    if not _entry_points_read:
        _entry_points_read = True
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.value not in _loaded:
                _loaded.add(ep.value)
                ep.load()


def section_file(path: str | Path) -> tuple[str, dict[str, Any]]:
    """An experiment's config section from its ``section.yaml``: one key with its JSON schema (defaults and
    descriptions), for :attr:`Measurement.section`; read once, when the experiment registers."""
    try:
        doc = yaml.load(Path(path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(doc, dict) or len(doc) != 1 or not isinstance(next(iter(doc.values())), dict):
        raise ValueError(f"{path}: holds one config section, a key with its JSON schema (key: {{type: object, ...}})")
    ((key, schema),) = doc.items()
    return str(key), schema


@functools.cache
def section_defaults(path: str | Path) -> dict[str, Any]:
    """The defaults of an experiment's config section (its ``section.yaml``), key by key: what its one reader
    (the folder's ``section.py``) takes for a key a config leaves out."""
    _, schema = section_file(path)
    return {str(k): p.get("default") for k, p in (schema.get("properties") or {}).items()}


def summary_files(stem: str, wanted: Callable[[Study], object]) -> Callable[[Study, str], list[str]]:
    """An experiment's study-level aggregate, ``<results>/<stem>.parquet`` and ``.md``, when ``wanted``."""

    def outputs(study: Study, results: str) -> list[str]:
        return [f"{results}/{stem}.parquet", f"{results}/{stem}.md"] if wanted(study) else []

    return outputs
