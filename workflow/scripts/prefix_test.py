"""Adapter: prefix_test rule -> worthit.prefix.prefix_test."""

from worthit.config import Study
from worthit.prefix import prefix_test
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
prefix_test(
    Study(sm.config),
    sm.wildcards.variant,
    int(sm.wildcards.length),
    sm.input.server,
    sm.input.manifest,
    sm.output.requests,
)
