"""Adapter: aggregate_specdec rule -> worthit.experiments.specdec.measure (specdec_summary.parquet + .md)."""

from worthit.config import Study, config_hash
from worthit.experiments.specdec.measure import summary_rows, write_summary
from worthit.paths import parse
from worthit.provenance import stamp
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
parsed = {p: parse(p) for p in sm.input.load}
loads = {(r.variant, r.value): p for p, r in parsed.items() if r.run == 1}
rows = summary_rows(study, loads, sm.input.verify[0] if sm.input.verify else None)
write_summary(
    rows,
    sm.output.parquet,
    sm.output.md,
    study.name,
    metadata=stamp(config_hash=config_hash(sm.config)),
    threshold=float(sm.config["decide"]["min_predicted_speedup"]),  # the one rule of thumb (the verdicts use it too)
)
