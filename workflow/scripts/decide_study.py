"""Adapter: decide_study rule -> worthit.report (verdicts, deployments and every table but the validation)."""

from pathlib import Path

from worthit.config import config_hash, validate
from worthit.provenance import stamp
from worthit.report.build import from_files, save_config, write_tables
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
cfg = validate(sm.config)
out = Path(sm.output.md).parent
write_tables(from_files(cfg, sm.input.results), out, stamp(config_hash=config_hash(cfg)))
save_config(cfg, out)
