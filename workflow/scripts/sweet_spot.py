"""Adapter: sweet_spot rule -> worthit.stages.sweet_spot."""

from worthit.config import Study
from worthit.stages import setup_logging, sweet_spot

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
sweet_spot(
    study,
    sm.wildcards.variant,
    sm.input.server,
    sm.input.manifest,
    dict(zip(study.levels, sm.params.grid, strict=True)),
    sm.output.result,
)
