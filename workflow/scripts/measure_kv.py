"""Adapter: measure_kv rule -> worthit.experiments.kv.measure.measure_kv."""

from worthit.config import Study
from worthit.experiments.kv.measure import measure_kv
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
measure_kv(Study(sm.config), sm.wildcards.variant, sm.input.server, sm.input.manifest, out=sm.output.kv)
