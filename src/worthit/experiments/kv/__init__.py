"""KV-cache capacity: the blocks a served variant's engine allocated, their tokens and GiB, and the critical
concurrency (KV tokens / tokens per request), set in the report against the knees of its load curves and its
memory-bandwidth use.

Experiment name ``kv`` in ``variants.<v>.experiments``; the report's side is named ``capacity``. Its files:

- :mod:`.measure`: the ``kv_cache`` row from the running server's /metrics and the model config
  (``measure_kv``, run first in the variant's turns through ``stages.consume``);
- :mod:`.tables`: its Parquet table (``kv_cache``);
- :mod:`.report`: capacity per variant (blocks, knees, MBU), the exact block-count comparison it hands the
  decision layer, its table and figure;
- the rules: ``workflow/rules/kv.smk``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worthit import measurements
from worthit.experiments.kv.tables import KV_CACHE, REPORT_CAPACITY

if TYPE_CHECKING:
    from worthit.config import Study

NAME = "kv"


def consumers(study: Study, variant: str) -> list[str]:
    """One turn, ``kv``, on every variant whose experiments include ``kv``."""
    return [NAME] if NAME in study.variant(variant).experiments else []


def register() -> None:
    """Register both sides, as an experiment outside the package does."""
    from worthit.experiments.kv import report
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(NAME, consumers, "kv.smk", order=10, tables=(KV_CACHE, REPORT_CAPACITY))
    )
    experiments.register(report.EXPERIMENT)
