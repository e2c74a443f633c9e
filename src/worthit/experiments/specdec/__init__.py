"""Speculative decoding: the verify-cost measurement on the base variant's server and the predicted against the
measured speed-up of every speculative variant (S = α / (kγ + c) where every step drafts: :mod:`.model`).

Config key ``specdec`` (its section.yaml); it runs whenever a variant has a
``speculative_config``. Its files:

- :mod:`.measure`: the verify measurement (``measure_verify``, run in its turn through ``stages.consume``): raw
  request rows;
- :mod:`.model`: the speed-up model and the one formula of each of its inputs;
- :mod:`.tables`: its Parquet tables (``verify_requests``, ``report_specdec``);
- :mod:`.report`: its analysis for the report (the only one: ``report/specdec.csv`` and the report's tables),
  the checks it hands the decision layer, its table and figure;
- the rules: ``workflow/rules/specdec.smk``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from worthit import measurements
from worthit.experiments.specdec.tables import REPORT_SPECDEC, VERIFY

if TYPE_CHECKING:
    from worthit.config import Study

NAME = "specdec"
SECTION = Path(__file__).with_name("section.yaml")  # its config section


def consumers(study: Study, variant: str) -> list[str]:
    """The verify measurement, on the base variant's server, when the study has speculative variants."""
    from worthit.experiments.specdec.section import base_variant, spec_variants

    return ["specdec/verify"] if spec_variants(study) and variant == base_variant(study) else []


def register() -> None:
    """Register both sides, as an experiment outside the package does."""
    from worthit.experiments.specdec import report
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(
            NAME,
            consumers,
            "specdec.smk",
            order=50,
            selectable=False,
            tables=(VERIFY, REPORT_SPECDEC),
            section=measurements.section_file(SECTION),
        )
    )
    experiments.register(report.EXPERIMENT)
