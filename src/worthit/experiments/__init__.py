"""The experiments, one folder each: ``worthit.experiments.<name>`` holds an experiment's measurement, its
Parquet tables, its analysis for the report, its config section and its registration (docs/architecture.md,
"Adding an experiment"); its rule file is ``workflow/rules/<name>.smk``.

Each package's ``register()`` adds it to both registries (:mod:`worthit.measurements` and
:mod:`worthit.report.experiments`) the way an experiment outside the package registers itself;
:data:`BUILTIN` is the one list of the built-in ones. :data:`APART` names the packages of their own that register
the same way (``worthit tune``, :mod:`worthit.tune`: its tables).
"""

from __future__ import annotations

import importlib

BUILTIN = ("quantize", "kv", "loadtest", "sweet_spot", "prefix", "specdec", "accuracy", "deploy")
APART = ("worthit.tune",)  # packages of their own, registered with the built-in experiments

_registered = False


def register_builtin() -> None:
    """Import and register every built-in experiment and package apart (once per process)."""
    global _registered
    if _registered:
        return
    _registered = True
    for name in BUILTIN:
        importlib.import_module(f"{__name__}.{name}").register()
    for module in APART:
        importlib.import_module(module).register()
