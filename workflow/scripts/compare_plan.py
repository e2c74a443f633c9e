"""Adapter: compare_plan rule -> worthit.plan.compare (the plan against the study's measurements). A
comparison that cannot be made is a failure record: it never fails the study."""

import logging
import traceback
from pathlib import Path

from worthit import atomic, plan, schemas
from worthit.report.rules import Rules
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = str(sm.config["study"])
try:
    planned = schemas.read(sm.input.plan, schemas.PLAN)
    if not planned.ok:
        raise plan.PlanError(planned.reason)
    rows = plan.fill_in(planned.table.to_pylist(), planned.metadata, sm.config, Path.cwd())
    comparison = plan.compare(
        rows,
        Path(sm.input.plan).parent,
        sm.config["plan"]["tolerances"],
        knee_fraction=Rules.from_config(sm.config).knee_throughput_fraction,
        report=Path(sm.input.capacity).parent,  # the report's tables: the one analysis of the measurement
    )
except Exception as e:  # noqa: BLE001 - recorded, not raised
    logging.error("no comparison: %s\n%s", e, traceback.format_exc())
    tail = traceback.format_exc()[-2000:]
    schemas.write_failure(sm.output.parquet, schemas.PLAN_VS_MEASURED, f"no comparison: {e}", log_tail=tail)
    atomic.write_text(sm.output.md, f"# Plan vs measured: {study}\n\nNo comparison: {e}\n")
else:
    plan.write_comparison(comparison, sm.output.parquet, {"plan": planned.metadata, "plan_rows": rows})
    atomic.write_text(sm.output.md, plan.comparison_markdown(comparison, study))
    for r in comparison:
        if r["within_tolerance"] is False:
            logging.warning(
                "%s %s: predicted %s, measured %s (%s)",
                r["variant"],
                r["quantity"],
                r["predicted"],
                r["measured"],
                r["flag"],
            )
