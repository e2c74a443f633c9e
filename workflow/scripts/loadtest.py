"""Adapter: loadtest rule -> worthit.experiments.loadtest.measure.loadtest."""

import contextlib

from worthit.config import Study
from worthit.experiments.loadtest.measure import loadtest
from worthit.experiments.loadtest.section import run_of
from worthit.loadgen import prompts
from worthit.stages import setup_logging

# The tokenizer's library, imported now, while this job waits for its turn on the server, not in its turn
# (its measurement imports it where it loads the tokenizer: seconds of the server's time on a slow machine).
with contextlib.suppress(ImportError):
    prompts.tokenizer_class()

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
loadtest(
    Study(sm.config),
    sm.wildcards.variant,
    sm.wildcards.level,
    sm.input.server,
    manifest_path=sm.input.manifest,
    out=sm.output.requests,
    run=run_of(sm.wildcards.rep),
    timeline_out=sm.output.get("timeline"),
)
