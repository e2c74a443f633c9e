"""Adapter: sweet_spot rule -> worthit.experiments.sweet_spot.measure.sweet_spot."""

from worthit.config import Study
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.sweet_spot.measure import sweet_spot
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
sweet_spot(
    study,
    sm.wildcards.variant,
    sm.input.server,
    sm.input.manifest,
    grid_files=dict(zip(load_section(study.cfg).grid_levels(sm.wildcards.variant), sm.params.grid, strict=True)),
    out=sm.output.result,
)
