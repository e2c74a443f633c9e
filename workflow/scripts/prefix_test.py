"""Adapter: prefix_test rule -> worthit.experiments.prefix.measure.prefix_test."""

from worthit.config import Study
from worthit.experiments.prefix.measure import prefix_test
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
prefix_test(
    Study(sm.config),
    sm.wildcards.variant,
    prefix_tokens=int(sm.wildcards.length),
    state_path=sm.input.server,
    manifest_path=sm.input.manifest,
    out=sm.output.requests,
)
