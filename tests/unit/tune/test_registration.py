"""The tune registers with the built-in experiments (worthit.experiments.APART): its tables are in the schema
module's index by name, as an experiment's are."""

from worthit import schemas
from worthit.experiments import APART
from worthit.tune.tables import TUNE_CONFIRMATION, TUNE_TRACE


def test_the_tunes_tables_are_found_by_name_once_the_experiments_are_registered() -> None:
    assert "worthit.tune" in APART
    assert schemas.table_named("tune_trace") is TUNE_TRACE
    assert schemas.table_named("tune_confirmation") is TUNE_CONFIRMATION
