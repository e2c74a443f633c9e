"""Adapter: write_deployment_spec rule -> worthit.experiments.deploy.validate.serve_spec."""

import json
from pathlib import Path

from worthit.config import Study
from worthit.experiments.deploy.validate import serve_spec
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
spec = serve_spec(Study(sm.config), sm.input.deployments, sm.wildcards.scenario, sm.params.python)
Path(sm.output.spec).write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n")
