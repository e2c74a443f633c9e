"""Adapter: decide_study rule -> worthit.report (tables, verdicts, deployments)."""

from pathlib import Path

from worthit.config import config_hash
from worthit.provenance import stamp
from worthit.report.build import analysis, write_tables
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
a = analysis(sm.config, [*sm.input.results, *sm.input.aggregates])
write_tables(a, Path(sm.output.md).parent, stamp(config_hash=config_hash(sm.config)))
