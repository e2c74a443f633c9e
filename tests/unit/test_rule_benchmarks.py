"""Every rule that runs a job records a Snakemake benchmark file where worthit.cost finds it by the rule's name
(results/<study>/benchmarks/<rule>/..., or logs/<rule>/ for the models shared by studies); the serve jobs
(services) do not: a service's benchmark file arriving after --latency-wait fails its group."""

import re
from pathlib import Path

RULES = Path(__file__).resolve().parents[2] / "workflow" / "rules"


def _rules() -> dict[str, str]:
    out = {}
    for smk in sorted(RULES.glob("*.smk")):
        for block in re.split(r"(?m)^(?=rule \w+:)", smk.read_text()):
            if m := re.match(r"rule (\w+):", block):
                out[m.group(1)] = block
    return out


def test_every_job_has_a_benchmark_file_named_by_its_rule():
    rules = _rules()
    assert {"loadtest", "serve_variant", "render_report", "study_cost"} <= rules.keys()
    for name, block in rules.items():
        bench = re.search(r"(?m)^    benchmark:\n        (.+)$", block)
        if "service(" in block:
            assert bench is None, f"{name}: a service job must not have a benchmark file"
            continue
        assert bench is not None, f"rule {name} has no benchmark: file"
        path = bench.group(1)
        assert path.startswith((f'f"{{BENCHMARKS}}/{name}/', f'"logs/{name}/')), (name, path)
        assert path.rstrip(",").endswith('.tsv"'), (name, path)
