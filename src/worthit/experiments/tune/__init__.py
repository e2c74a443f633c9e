"""``worthit tune``: the best deployment under the SLO, searched, pruned by the plan and confirmed (issue 35).

Built so far, each one idea: :mod:`~worthit.experiments.tune.space` (the ``tune:`` section as typed values),
:mod:`~worthit.experiments.tune.flags` (the space checked against the installed ``vllm serve --help=all``),
:mod:`~worthit.experiments.tune.search` (Optuna TPE per scenario, journal storage, resume),
:mod:`~worthit.experiments.tune.prune` (the plan's bounds: KV capacity and the throughput roofline),
:mod:`~worthit.experiments.tune.confirm` (the winner's-curse guard),
:mod:`~worthit.experiments.tune.dry_run` (``worthit tune --dry-run``),
:mod:`~worthit.experiments.tune.rounds` (``worthit tune``: the rounds, each candidate a load-tested variant of
the tune's own study, measured by the workflow) and :mod:`~worthit.experiments.tune.tables` (its trace). Not
yet: the live confirmation on fresh servers and the report section.

Importing this package imports neither Optuna nor the report: each module imports what it needs.
"""
