"""``worthit tune``: the best deployment under the SLO, searched, pruned by the plan and confirmed (issue 35).

Built so far, each one idea: :mod:`~worthit.experiments.tune.space` (the ``tune:`` section as typed values),
:mod:`~worthit.experiments.tune.flags` (the space checked against the installed ``vllm serve --help=all``),
:mod:`~worthit.experiments.tune.search` (Optuna TPE per scenario, journal storage, resume),
:mod:`~worthit.experiments.tune.prune` (the plan's bounds: KV capacity and the throughput roofline),
:mod:`~worthit.experiments.tune.confirm` (the winner's-curse guard) and
:mod:`~worthit.experiments.tune.dry_run` (``worthit tune --dry-run``). Not yet: the Snakemake rounds
(checkpoints), live measurement, the report section and the benchmarks/tune replay.

Importing this package imports neither Optuna nor the report: each module imports what it needs.
"""
