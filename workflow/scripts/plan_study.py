"""Adapter: plan_study rule -> worthit.plan (the study config on the hardware found here)."""

import logging
from pathlib import Path

from worthit import atomic, plan
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
cfg = sm.config
hw = plan.hardware_for(cfg)
study_plan = plan.make_plan(cfg, hw, Path.cwd(), hub=bool(cfg["plan"]["hub_configs"]))
plan.write(study_plan, sm.output.plan)
atomic.write_text(sm.output.md, plan.markdown(study_plan))
for row in study_plan.rows:
    logging.info("%s: %s %s", row["variant"], row["status"], row["reason"] or "")
