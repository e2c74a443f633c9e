"""Every Parquet table worthit writes, defined once and registered here.

A table is a list of :class:`Field` (name, Arrow type, description; :mod:`.definition`). From it come the pyarrow
schema, the documentation and the checks on read. Files are written atomically (temp file + rename) with
provenance and a status in the key-value metadata, so a failed experiment is a file too: zero rows,
``status`` = ``failed`` / ``not_applicable`` and its reason and log tail (:mod:`.io`).

The definitions live with the experiment that writes them: each folder of :mod:`worthit.experiments` has its
``tables.py`` (an experiment outside the package likewise), registered here by
:func:`worthit.measurements.register`; this package holds the tables of no single experiment, :mod:`.plan`,
:mod:`.cost` and the report's own views (:mod:`.report`; :func:`report_tables` adds each
experiment's). :data:`TABLES` indexes every table registered so far by name; :func:`table_named` registers
every experiment first.
"""

from __future__ import annotations

from collections.abc import Iterable

from worthit.schemas.cost import STUDY_COST
from worthit.schemas.definition import (
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
from worthit.schemas.plan import PLAN, PLAN_VS_MEASURED
from worthit.schemas.report import (
    REPORT_CAPABILITY,
    REPORT_COMPARISON,
    REPORT_FAILURES,
    REPORT_OWN_TABLES,
    REPORT_VERDICTS,
)

TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        PLAN,
        PLAN_VS_MEASURED,
        STUDY_COST,
        *REPORT_OWN_TABLES,
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


def table_named(name: str) -> Table:
    """The table of that name, with every experiment's tables registered first (:data:`TABLES` holds those
    of the experiments registered so far); KeyError for a name no experiment defines."""
    from worthit.measurements import load_plugins

    load_plugins()
    return TABLES[name]


def report_tables() -> tuple[Table, ...]:
    """Every table the report writes: its own (the decision layer's) and each registered experiment's
    (named ``report_*``, defined in the experiment's ``tables.py``), in registration order."""
    from worthit.measurements import load_plugins

    load_plugins()
    return (
        *REPORT_OWN_TABLES,
        *(t for t in TABLES.values() if t.name.startswith("report_") and t not in REPORT_OWN_TABLES),
    )


def docs(tables: Iterable[Table] = TABLES.values()) -> str:
    return "\n\n".join(t.markdown() for t in tables)


__all__ = [
    "report_tables",
    "META_PREFIX",
    "PLAN",
    "PLAN_VS_MEASURED",
    "REPORT_CAPABILITY",
    "REPORT_COMPARISON",
    "REPORT_FAILURES",
    "REPORT_OWN_TABLES",
    "REPORT_VERDICTS",
    "STATUSES",
    "STATUS_FAILED",
    "STATUS_NOT_APPLICABLE",
    "STATUS_NOT_RUN",
    "STATUS_OK",
    "STUDY_COST",
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
    "table_named",
    "read_arrow",
    "read_file_metadata",
    "register",
    "to_arrow",
    "write",
    "write_failure",
]
