"""Adapter: render_report rule -> worthit.report.html (one self-contained page)."""

from pathlib import Path

from worthit.report import html
from worthit.report.build import analysis, figures_in, read_tables
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
a = analysis(sm.config, [*sm.input.results, *sm.input.aggregates])
html.write(a, read_tables(Path(sm.input.tables[0]).parent), figures_in(sm.input.figures), sm.output.html)
