from pathlib import Path

import pytest

from worthit.paths import parse


@pytest.mark.parametrize(
    ("path", "variant", "experiment", "kind", "value", "run"),
    [
        ("results/s/variant~bf16/kv.parquet", "bf16", "kv", "kv", None, 1),
        ("results/s/variant~bf16/load/conc~16.parquet", "bf16", "load/conc~16", "load/conc", 16, 1),
        ("results/s/variant~a.b-c/load/conc~16.rep~3.parquet", "a.b-c", "load/conc~16.rep~3", "load/conc", 16, 3),
        ("/abs/results/s/variant~x/prefix/len~1500.parquet", "x", "prefix/len~1500", "prefix/len", 1500, 1),
        ("results/s/variant~x/specdec/verify.parquet", "x", "specdec/verify", "specdec/verify", None, 1),
    ],
)
def test_result_paths_parse_back(path, variant, experiment, kind, value, run):
    r = parse(Path(path))
    assert (r.variant, r.experiment, r.kind, r.value, r.run) == (variant, experiment, kind, value, run)


def test_a_path_outside_the_results_layout_is_refused():
    with pytest.raises(ValueError, match="not a result path"):
        parse("results/s/summary.parquet")
