"""Prefix caching: TTFT of requests that share a prefix of each length, with the cache on and off.

Config key ``prefix`` (its section.yaml, read through :func:`.section.section`) and the experiment name ``prefix`` in
``variants.<v>.experiments``. Its files:

- :mod:`.measure`: one shared-prefix length on a variant's server (``prefix_test``, run in its turn through
  ``stages.consume``): raw request rows;
- :mod:`.tables`: its Parquet tables (``prefix_requests``, ``report_prefix``);
- :mod:`.analysis`: the one rule of which variant is the other side of a point;
- :mod:`.report`: its analysis for the report (the only one: ``report/prefix.csv`` and the report's tables),
  the evidence of the "prefix caching (on vs off)" verdict, its table and figure;
- the rules: ``workflow/rules/prefix.smk``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worthit import measurements
from worthit.experiments.prefix.section import SECTION_FILE, section
from worthit.experiments.prefix.tables import PREFIX, REPORT_PREFIX

if TYPE_CHECKING:
    from worthit.config import Study

NAME = "prefix"
SECTION = SECTION_FILE  # its config section


def consumers(study: Study, variant: str) -> list[str]:
    """One turn per shared-prefix length on every variant whose experiments include ``prefix``."""
    lengths = section(study.cfg).lengths
    return [f"prefix/len~{n}" for n in lengths] if NAME in study.variant(variant).experiments else []


def register() -> None:
    """Register both sides, as an experiment outside the package does."""
    from worthit.experiments.prefix import report
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(
            NAME,
            consumers,
            "prefix.smk",
            order=40,
            tables=(PREFIX, REPORT_PREFIX),
            section=measurements.section_file(SECTION),
        )
    )
    experiments.register(report.EXPERIMENT)
