"""Adapter: aggregate_prefix rule -> worthit.experiments.prefix.measure (prefix_summary.parquet + .md)."""

from worthit.config import Study, config_hash
from worthit.experiments.prefix.measure import read_rows, write_summary
from worthit.paths import parse
from worthit.provenance import stamp
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
parsed = {p: parse(p) for p in sm.input.prefix}
files = {(r.variant, r.value): p for p, r in parsed.items()}
rows = read_rows(files, {v: study.variant(v).prefix_caching for v in study.variants_with("prefix")})
write_summary(
    rows,
    parquet=sm.output.parquet,
    md=sm.output.md,
    study=study.name,
    metadata=stamp(config_hash=config_hash(sm.config)),
)
