"""The SLO sweet spot: per variant of ``sweet_spot.variants``, the highest concurrency whose P99 TTFT and P99
TPOT meet the SLO, bisected on the variant's server from the load grid's crossover.

Config key ``sweet_spot`` (its section.yaml); it is not a value of ``variants.<v>.experiments``
(``sweet_spot.variants`` names the variants). Its files:

- :mod:`.search`: the bisection itself, pure (the bracket, how it ended);
- :mod:`.measure`: the search on a variant's server (``sweet_spot``, run in its turn through
  ``stages.consume``, after the variant's grid levels);
- :mod:`.tables`: its Parquet table (``sweet_spot``);
- :mod:`.report`: its analysis for the report, its table and figure (the latency-first deployment reads it);
- the rules: ``workflow/rules/sweet_spot.smk``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from worthit import measurements
from worthit.experiments.sweet_spot.section import section
from worthit.experiments.sweet_spot.tables import REPORT_SWEET_SPOT, SWEET_SPOT

if TYPE_CHECKING:
    from worthit.config import Study

NAME = "sweet_spot"
SECTION = Path(__file__).with_name("section.yaml")  # its config section


def consumers(study: Study, variant: str) -> list[str]:
    """One turn on each searched variant's server, after the grid it starts from."""
    return [NAME] if variant in section(study.cfg).variants else []


def register() -> None:
    """Register both sides, as an experiment outside the package does."""
    from worthit.experiments.sweet_spot import report
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(
            NAME,
            consumers,
            "sweet_spot.smk",
            order=30,
            selectable=False,
            tables=(SWEET_SPOT, REPORT_SWEET_SPOT),
            section=measurements.section_file(SECTION),
        )
    )
    experiments.register(report.EXPERIMENT)
