"""Adapter: plot_study rule -> worthit.report.plots (only the figures whose data exist)."""

from worthit.report.build import analysis
from worthit.report.plots import write
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
write(analysis(sm.config, [*sm.input.results, *sm.input.aggregates]), sm.output.figures)
