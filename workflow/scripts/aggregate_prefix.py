"""Adapter: aggregate_prefix rule -> worthit.prefix (prefix_summary.parquet + .md)."""
import re

from worthit.config import Study, config_hash
from worthit.prefix import read_rows, write_summary
from worthit.provenance import stamp
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
files = {}
for path in sm.input.prefix:
    m = re.search(r"variant~([^/]+)/prefix/len~(\d+)\.parquet$", path)
    files[(m.group(1), int(m.group(2)))] = path
rows = read_rows(files, {v: study.variant(v).prefix_caching for v in study.variants_with("prefix")})
write_summary(rows, sm.output.parquet, sm.output.md, study.name, stamp(config_hash=config_hash(sm.config)))
