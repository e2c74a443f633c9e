"""Adapter: aggregate_specdec rule -> worthit.specdec (specdec_summary.parquet + .md)."""
import re

from worthit.config import Study, config_hash
from worthit.provenance import stamp
from worthit.specdec import summary_rows, write_summary
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
loads = {}
for path in sm.input.load:
    m = re.search(r"variant~([^/]+)/load/conc~(\d+)\.parquet$", path)
    loads[(m.group(1), int(m.group(2)))] = path
rows = summary_rows(study, loads, sm.input.verify[0] if sm.input.verify else None)
write_summary(rows, sm.output.parquet, sm.output.md, study.name, stamp(config_hash=config_hash(sm.config)),
              float(sm.config["specdec"]["worth_trying_speedup"]))
