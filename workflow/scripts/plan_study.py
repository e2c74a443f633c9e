"""Adapter: plan_study rule -> worthit.plan (the study config on the hardware found here). A plan that
cannot be made is a failure record: it never stops the study."""

import logging
import traceback
from pathlib import Path

from worthit import atomic, plan, schemas
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
cfg = sm.config
try:
    study_plan = plan.make_plan(cfg, plan.hardware_for(cfg), Path.cwd(), hub=bool(cfg["plan"]["hub_configs"]))
except Exception as e:  # noqa: BLE001 - recorded, not raised
    logging.error("no plan: %s\n%s", e, traceback.format_exc())
    schemas.write_failure(sm.output.plan, schemas.PLAN, f"no plan: {e}", log_tail=traceback.format_exc()[-2000:])
    atomic.write_text(sm.output.md, f"# Plan: {cfg['study']}\n\nNo plan: {e}\n")
else:
    plan.write(study_plan, sm.output.plan)
    atomic.write_text(sm.output.md, plan.markdown(study_plan))
    for row in study_plan.rows:
        logging.info("%s: %s %s", row["variant"], row["status"], row["reason"] or "")
