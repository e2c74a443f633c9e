"""Adapter: study_cost rule -> worthit.cost (cost.parquet + cost.md)."""

from pathlib import Path

from worthit import cost, schemas
from worthit.config import Study, config_hash
from worthit.experiments.deploy.validate import SCENARIOS
from worthit.provenance import stamp
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)
results = str(Path(sm.output.parquet).parent)  # results/<study>
benchmarks = Path(results) / "benchmarks"  # where every rule's benchmark: file lands (common.smk BENCHMARKS)
servers = [
    cost.ServerFiles(
        v, f"{results}/logs/serve/{v}.log", f"{results}/variant~{v}/server.json.exit", study.variant(v).gpus
    )
    for v in study.variants
]
if study.cfg["validate_deployments"]:  # the most GPUs any variant claims, as serve_deployment does
    gpus = max([study.variant(v).gpus for v in study.variants] or [0])
    servers += [
        cost.ServerFiles(
            f"deployment~{s}",
            f"{results}/logs/serve/deployment~{s}.log",
            f"{results}/deployment~{s}/server.json.exit",
            gpus,
        )
        for s in SCENARIOS
    ]
stages: dict[str, list[Path]] = {}
for path in sorted(benchmarks.glob("*/**/*.tsv")):
    stages.setdefault(path.relative_to(benchmarks).parts[0], []).append(path)
for rule in ("fetch_model", "quantize_model"):  # models are shared by studies: their benchmarks live in logs/
    found = [Path(f"logs/{rule}/{m}.benchmark.tsv") for m in study.cfg["models"]]
    stages[rule] = [p for p in found if p.exists()]
plan = schemas.read(sm.input.plan, schemas.PLAN)
planned = {r["variant"]: r["est_wall_s"] for r in plan.table.to_pylist() if r.get("est_wall_s") is not None}
rows = cost.cost_rows(study.name, stages, servers, planned)
cost.write(rows, sm.output.parquet, sm.output.md, study.name, metadata=stamp(config_hash=config_hash(sm.config)))
