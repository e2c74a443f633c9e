"""Fixtures the unit tests share: the committed embedded-default study's config and a copy of its results
(:mod:`tests.unit.embedded_results`), for the report's tests."""

from tests.unit.embedded_results import cfg, results  # noqa: F401 (fixtures, found by name)
