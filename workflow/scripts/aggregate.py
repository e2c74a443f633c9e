"""Adapter: aggregate rule -> worthit.aggregate."""

from worthit.aggregate import summary_rows, write_summary
from worthit.config import Study, config_hash
from worthit.experiments.accuracy.summary import accuracy_rows, write_accuracy_summary
from worthit.metrics import Slo
from worthit.paths import parse
from worthit.provenance import stamp
from worthit.report.rules import Rules
from worthit.stages import setup_logging

sm = snakemake  # noqa: F821 - injected by Snakemake
setup_logging(sm.log[0])
study = Study(sm.config)


def variant_of(path: str) -> str:
    return parse(path).variant


kv = {variant_of(p): p for p in sm.input.kv}
load: dict[str, list[str]] = {}
for p in sm.input.load:
    load.setdefault(variant_of(p), []).append(p)
rows = summary_rows(kv, load, Slo.from_config(sm.config["slo"]))
write_summary(rows, sm.output.parquet, sm.output.md, study.name, metadata=stamp(config_hash=config_hash(sm.config)))
accuracy = {variant_of(p): p for p in sm.input.accuracy}
baseline = str(sm.config["baseline_variant"])
accuracy_samples = {variant_of(p): p for p in sm.input.accuracy_samples}
rules = Rules.from_config(sm.config)  # the report's decide section: the same bound per task
write_accuracy_summary(
    accuracy_rows(accuracy, baseline, accuracy_samples, rules.max_drop, baseline_of=study.baseline_of),
    sm.output.accuracy_parquet,
    sm.output.accuracy_md,
    study.name,
    baseline=baseline,
    metadata=stamp(config_hash=config_hash(sm.config)),
)
