"""Adapter: measure_verify rule -> worthit.experiments.specdec.measure.measure_verify."""

from worthit.config import Study
from worthit.experiments.specdec.measure import measure_verify
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
measure_verify(Study(sm.config), sm.wildcards.variant, sm.input.server, sm.input.manifest, out=sm.output.verify)
