"""Adapter: render_report rule -> worthit.report (the validation table and one self-contained page)."""

from pathlib import Path

from worthit.config import config_hash, validate
from worthit.experiments.deploy.tables import REPORT_VALIDATION
from worthit.provenance import stamp
from worthit.report.build import decision_figures, figures_in, from_files, study_views, write_tables
from worthit.report.render import write_html
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
cfg = validate(sm.config)
report = from_files(cfg, [*sm.input.results, *sm.input.validation])
write_tables(report, Path(sm.output.validation).parent, stamp(config_hash=config_hash(cfg)), [REPORT_VALIDATION])
# the study's cost (cost.smk) and the plan against the measurement (plan.smk), read from the study folder
write_html(
    report.ctx,
    [*report.views, *study_views(Path(sm.input.cost).parent)],
    figures_in(report, sm.input.figures),
    sm.output.html,
    decision_figures=decision_figures(report),
)
