"""Adapter: compare_plan rule -> worthit.plan.compare (the plan against the study's measurements)."""

from pathlib import Path

from worthit import atomic, plan, schemas
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
planned = schemas.read(sm.input.plan, schemas.PLAN)
rows = plan.fill_in(planned.table.to_pylist(), planned.metadata, sm.config, Path.cwd())
comparison = plan.compare(rows, Path(sm.input.summary).parent, sm.config["plan"]["tolerances"])
plan.write_comparison(comparison, sm.output.parquet, {"plan": planned.metadata, "plan_rows": rows})
atomic.write_text(sm.output.md, plan.comparison_markdown(comparison, str(sm.config["study"])))
