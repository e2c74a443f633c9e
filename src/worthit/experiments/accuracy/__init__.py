"""Accuracy: lm-eval against each variant's served endpoint, judged task by task as non-inferiority against
the baseline (the change in points and its 95% interval above ``-max_accuracy_drop_pt``).

Config key ``accuracy`` (its section.yaml) and the experiment name ``accuracy`` in
``variants.<v>.experiments``. Its files:

- :mod:`.measure`: each configured task as one run of lm-eval's CLI against the server, in the variant's
  last turn (``accuracy``, through ``stages.consume``); ``accuracy.parquet`` and ``accuracy_samples.parquet``;
- :mod:`.tables`: its Parquet tables (``accuracy``, ``accuracy_samples``, ``accuracy_summary``);
- :mod:`.summary`: the change of each task against the baseline, one way everywhere, and the study summary
  ``accuracy_summary`` (written by the ``aggregate`` rule);
- :mod:`.report`: its analysis for the report, the per-task accuracy it hands the decision layer, its table
  and figure;
- the rules: ``workflow/rules/accuracy.smk``; the offline task data: :mod:`worthit.taskdata`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from worthit import measurements
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES, ACCURACY_SUMMARY, REPORT_ACCURACY

if TYPE_CHECKING:
    from worthit.config import Study

NAME = "accuracy"
SECTION = Path(__file__).with_name("section.yaml")  # its config section


def _runs(study: Study, variant: str) -> bool:
    return NAME in study.variant(variant).experiments


def consumers(study: Study, variant: str) -> list[str]:
    """One turn, ``accuracy``, on every variant whose experiments include ``accuracy`` (after its load)."""
    return [NAME] if _runs(study, variant) else []


def side_results(study: Study, variant: str) -> list[str]:
    """The per-document scores it writes beside ``accuracy.parquet``."""
    return ["accuracy_samples"] if _runs(study, variant) else []


def register() -> None:
    """Register both sides, as an experiment outside the package does."""
    from worthit.experiments.accuracy import report
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(
            NAME,
            consumers,
            "accuracy.smk",
            order=60,
            side_results=side_results,
            tables=(ACCURACY, ACCURACY_SAMPLES, ACCURACY_SUMMARY, REPORT_ACCURACY),
            machine_free=(ACCURACY, ACCURACY_SAMPLES),  # item scores do not depend on the machine's speed
            section=measurements.section_file(SECTION),
        )
    )
    experiments.register(report.EXPERIMENT)
