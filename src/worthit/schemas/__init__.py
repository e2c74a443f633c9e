"""Every Parquet table worthit writes, defined once and registered here.

A table is a list of :class:`Field` (name, Arrow type, description; :mod:`.table`). From it come the pyarrow
schema, the documentation and the checks on read. Files are written atomically (temp file + rename) with
provenance and a status in the key-value metadata, so a failed experiment is a file too: zero rows,
``status`` = ``failed`` / ``not_applicable`` and its reason and log tail (:mod:`.io`).

The definitions live with the experiment that writes them: :mod:`.load` (requests, timeline, summary),
:mod:`.accuracy`, :mod:`.plan`, :mod:`.cost`,
and the report's views in :mod:`.report`. :data:`TABLES` indexes every one of them by name; an experiment
in a folder of :mod:`worthit.experiments` (or outside the package) adds its own with :func:`register`, as
:func:`worthit.measurements.register` does with the tables it declares. Everything is importable from
``worthit.schemas``.
"""

from __future__ import annotations

from collections.abc import Iterable

from worthit.schemas.accuracy import ACCURACY, ACCURACY_SAMPLES, ACCURACY_SUMMARY
from worthit.schemas.cost import STUDY_COST
from worthit.schemas.io import (
    Result,
    SchemaError,
    UnreadableFile,
    read,
    read_arrow,
    read_file_metadata,
    to_arrow,
    write,
    write_failure,
)
from worthit.schemas.load import LOAD_REQUESTS, SERVER_TIMELINE, SUMMARY
from worthit.schemas.plan import PLAN, PLAN_VS_MEASURED
from worthit.schemas.report import (
    REPORT_ACCURACY,
    REPORT_CAPABILITY,
    REPORT_CAPACITY,
    REPORT_COMPARISON,
    REPORT_DEPLOYMENTS,
    REPORT_FAILURES,
    REPORT_LEVELS,
    REPORT_PREFIX,
    REPORT_SPECDEC,
    REPORT_SWEET_SPOT,
    REPORT_TABLES,
    REPORT_TIMELINE,
    REPORT_VALIDATION,
    REPORT_VERDICTS,
)
from worthit.schemas.table import (
    META_PREFIX,
    STATUS_FAILED,
    STATUS_NOT_APPLICABLE,
    STATUS_NOT_RUN,
    STATUS_OK,
    STATUSES,
    VARIANT,
    Field,
    Table,
    column,
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        LOAD_REQUESTS,
        SERVER_TIMELINE,
        ACCURACY,
        SUMMARY,
        ACCURACY_SUMMARY,
        ACCURACY_SAMPLES,
        PLAN,
        PLAN_VS_MEASURED,
        STUDY_COST,
        *REPORT_TABLES,
    )
}


def register(table: Table) -> Table:
    """Add an experiment's table to :data:`TABLES` (worthit.measurements); a second, different table of
    the same name is refused."""
    known = TABLES.get(table.name)
    if known is not None and known != table:
        raise ValueError(f"a Parquet table named {table.name!r} is already defined; give the new one another name")
    TABLES[table.name] = table
    return table


def docs(tables: Iterable[Table] = TABLES.values()) -> str:
    return "\n\n".join(t.markdown() for t in tables)


__all__ = [
    "ACCURACY",
    "ACCURACY_SAMPLES",
    "ACCURACY_SUMMARY",
    "LOAD_REQUESTS",
    "META_PREFIX",
    "PLAN",
    "PLAN_VS_MEASURED",
    "REPORT_ACCURACY",
    "REPORT_CAPABILITY",
    "REPORT_CAPACITY",
    "REPORT_COMPARISON",
    "REPORT_DEPLOYMENTS",
    "REPORT_FAILURES",
    "REPORT_LEVELS",
    "REPORT_PREFIX",
    "REPORT_SPECDEC",
    "REPORT_SWEET_SPOT",
    "REPORT_TABLES",
    "REPORT_TIMELINE",
    "REPORT_VALIDATION",
    "REPORT_VERDICTS",
    "SERVER_TIMELINE",
    "STATUSES",
    "STATUS_FAILED",
    "STATUS_NOT_APPLICABLE",
    "STATUS_NOT_RUN",
    "STATUS_OK",
    "STUDY_COST",
    "SUMMARY",
    "TABLES",
    "VARIANT",
    "Field",
    "Result",
    "SchemaError",
    "Table",
    "UnreadableFile",
    "column",
    "docs",
    "read",
    "read_arrow",
    "read_file_metadata",
    "register",
    "to_arrow",
    "write",
    "write_failure",
]
