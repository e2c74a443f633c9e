"""``worthit tune``: the best deployment under the SLO, searched, pruned by the plan and confirmed on fresh servers.

A package of its own beside :mod:`worthit.experiments`: it measures nothing on a variant's server, it writes a
study of its own (one variant per candidate) and drives the workflow on it, so it has no
:class:`~worthit.measurements.Measurement`. It has the hooks an experiment has where they apply, registered
with the built-in experiments (:func:`worthit.experiments.register_builtin`): its Parquet tables
(:func:`register`, :mod:`.tables`), its config section (``tune:`` in config/schema.yaml, read through one door,
:func:`.space.parse`) and its part of the report (:func:`.page.section`, folded into a study's report by
:mod:`worthit.report.build`). Its modules, each one idea:

- :mod:`.space`: the ``tune:`` section as typed values; :mod:`.flags`: the space checked against the installed
  ``vllm serve --help=all``;
- :mod:`.search`: Optuna TPE per scenario, journal storage, resume; :mod:`.prune`: the plan's bounds (KV
  capacity and the throughput roofline); :mod:`.accuracy_gate`: the accuracy screen of candidates that change
  what is served;
- :mod:`.dry_run`: ``worthit tune --dry-run``; :mod:`.live`: ``worthit tune``;
- :mod:`.rounds`: the rounds; :mod:`.candidates`: the tune's own study, one variant per candidate;
  :mod:`.reached`: what a candidate reached, from its files; :mod:`.driver`: the workflow run on it
  (Snakemake, and a stop that reaches its jobs); :mod:`.studies`: the studies a tune writes;
- :mod:`.confirm`: the winner's-curse guard; :mod:`.fresh_starts`: the confirmation on fresh servers;
- :mod:`.summary`, :mod:`.page`, :mod:`.tables`: what it shows and writes.

Importing this package imports neither Optuna nor the report: each module imports what it needs.
"""

from __future__ import annotations

NAME = "tune"


def register() -> None:
    """Add the tune's tables to the schema module's index, as an experiment's registration does."""
    from worthit import schemas
    from worthit.tune.tables import TABLES

    for t in TABLES:
        schemas.register(t)
