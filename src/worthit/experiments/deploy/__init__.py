"""Recommended deployments: what to run, chosen from the study's verdicts, and proven by serving it.

Experiment name ``deploy`` (not a value of ``variants.<v>.experiments``: it serves what the report
recommends, once the verdicts are in). Its files:

- :mod:`.recommend`: one ``vllm serve`` command per scenario (latency-first, throughput-first) with the
  concurrency and figures it promises, chosen among the baseline and the adopted variants, and the
  promise set against what its validation runs measured (the report's ``deployments`` and ``validation``
  tables);
- :mod:`.validate`: the validation stage: each command served exactly as printed and loaded at the promised
  concurrency, once per ``loadtest.repeats`` run (``results/<study>/deployment~<scenario>/``);
- :mod:`.token_cost`: what a token costs at each variant's best level under the SLO (energy per output token,
  USD per million output tokens; the report's ``token_cost`` table);
- :mod:`.tables`: the report tables ``report_deployments``, ``report_validation`` and ``report_token_cost``;
- :mod:`.report`: what the report core asks of it: the deployments' tables built from the verdicts, their
  commands on the page and their lines in the terminal's summary;
- the rules: ``workflow/rules/deploy.smk`` (run when ``validate_deployments`` is true).
"""

from __future__ import annotations

NAME = "deploy"


def register() -> None:
    """Register the stage's rule file and tables the way an experiment outside the package does; it takes no
    turn on a variant's server (its servers are the deployments' own)."""
    from worthit import measurements
    from worthit.experiments.deploy import report, token_cost
    from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS, REPORT_TOKEN_COST, REPORT_VALIDATION
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(
            NAME,
            measurements.no_consumers,
            "deploy.smk",
            order=90,
            selectable=False,
            tables=(REPORT_DEPLOYMENTS, REPORT_VALIDATION, REPORT_TOKEN_COST),
        )
    )
    experiments.register(report.EXPERIMENT)  # the deployments, chosen from the verdicts
    experiments.register(token_cost.EXPERIMENT)  # what a token costs, beside the deployments
