"""Adapter: evaluate_accuracy rule -> worthit.accuracy.accuracy."""

from worthit.accuracy import accuracy
from worthit.config import Study
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
accuracy(
    Study(sm.config),
    sm.wildcards.variant,
    sm.input.server,
    sm.input.manifest,
    sm.output.accuracy,
    sm.output.samples,
    sm.output.raw,
)
