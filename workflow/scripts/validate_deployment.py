"""Adapter: validate_deployment rule -> worthit.experiments.deploy.validate.validate."""

from worthit.config import Study
from worthit.experiments.deploy.validate import validate
from worthit.experiments.loadtest.section import run_of
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
validate(
    Study(sm.config),
    sm.wildcards.scenario,
    sm.input.deployments,
    sm.input.spec,
    state_path=sm.input.server,
    out=sm.output.requests,
    run=run_of(sm.wildcards.rep),
)
