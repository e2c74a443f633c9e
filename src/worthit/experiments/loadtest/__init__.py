"""Load levels: each variant's server under closed-loop concurrency levels, open-loop request rates or a
workload's sessions, judged on TTFT, TPOT, output tokens/s and goodput under the SLO, with the server's
gauges sampled through each run (the timeline).

Experiment name ``loadtest`` in ``variants.<v>.experiments`` (config key ``loadtest``, its section.yaml;
``workloads`` adds named workloads, whose levels name their variants). Its files:

- :mod:`.section`: its config section as typed values, read through one door (``section(cfg)``), and the load
  levels it gives each variant (``variant_levels``, ``level_runs``, ``level``, ``workload_name``, ...);
- :mod:`.measure`: one level on a variant's server (``loadtest``, each level and run one turn through
  ``stages.consume``; the sweet-spot search and the deployments measure their levels with ``study_level``);
- :mod:`.tables`: its Parquet tables (``load_requests``, ``server_timeline`` and the study summary
  ``summary``, written by the ``aggregate`` rule with :mod:`worthit.aggregate`);
- :mod:`.report`: the levels' analysis for the report (named ``load``): the comparisons it hands the
  decision layer, the levels table and the latency and throughput figures;
- :mod:`.timeline`: the timeline's analysis for the report (named ``timeline``): queue depth and KV use over
  each run, set against the critical concurrency;
- the rules: ``workflow/rules/loadtest.smk``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from worthit import measurements
from worthit.experiments.loadtest.section import SECTION_FILE, section
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, REPORT_LEVELS, REPORT_TIMELINE, SERVER_TIMELINE, SUMMARY

if TYPE_CHECKING:
    from worthit.config import Study

NAME = "loadtest"
SECTION = SECTION_FILE  # its config section


def consumers(study: Study, variant: str) -> list[str]:
    """One turn per level and run; a workload level naming the variant is measured even without
    ``loadtest`` in its experiments."""
    return [lv.path(r) for lv, r in section(study.cfg).level_runs(variant)]


def side_results(study: Study, variant: str) -> list[str]:
    """The timeline each level writes beside its requests."""
    return section(study.cfg).timeline_files(variant)


def register() -> None:
    """Register both sides (the levels' and the timeline's report), as an experiment outside the package does."""
    from worthit.experiments.loadtest import report, timeline
    from worthit.report import experiments

    measurements.register(
        measurements.Measurement(
            NAME,
            consumers,
            "loadtest.smk",
            order=20,
            side_results=side_results,
            tables=(LOAD_REQUESTS, SERVER_TIMELINE, SUMMARY, REPORT_LEVELS, REPORT_TIMELINE),
            levels=LOAD_REQUESTS,
            section=measurements.section_file(SECTION),
        )
    )
    experiments.register(report.EXPERIMENT)
    experiments.register(timeline.EXPERIMENT)
