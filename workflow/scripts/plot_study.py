"""Adapter: plot_study rule -> worthit.report (only the figures whose data exist)."""

from worthit.config import validate
from worthit.report.build import from_files, write_figures
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
write_figures(from_files(validate(sm.config), sm.input.results), sm.output.figures)
