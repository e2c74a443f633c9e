"""Adapter: loadtest rule -> worthit.stages.loadtest."""

from worthit.config import Study
from worthit.stages import loadtest, setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
loadtest(
    Study(sm.config),
    sm.wildcards.variant,
    sm.wildcards.level,
    sm.input.server,
    sm.input.manifest,
    sm.output.requests,
    run=Study.run_of(sm.wildcards.rep),
    timeline_out=sm.output.get("timeline"),
)
