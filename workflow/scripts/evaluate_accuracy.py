"""Adapter: evaluate_accuracy rule -> worthit.experiments.accuracy.measure.accuracy."""

import contextlib

from worthit.config import Study
from worthit.experiments.accuracy.measure import accuracy
from worthit.loadgen import prompts
from worthit.stages import setup_logging

# The tokenizer's library, imported now, while this job waits for its turn on the server, not in its turn
# (its measurement imports it where it loads the tokenizer: seconds of the server's time on a slow machine).
with contextlib.suppress(ImportError):
    prompts.tokenizer_class()

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
accuracy(
    Study(sm.config),
    sm.wildcards.variant,
    sm.input.server,
    sm.input.manifest,
    out=sm.output.accuracy,
    samples_out=sm.output.samples,
    raw_dir=sm.output.raw,
)
