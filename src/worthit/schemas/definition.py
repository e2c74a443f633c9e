"""What a table is: a list of :class:`Field` (name, Arrow type, description), from which come the pyarrow
schema, the documentation and the checks on read; and the statuses a result file carries."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from worthit import fmt

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_NOT_APPLICABLE = "not_applicable"
STATUS_NOT_RUN = "not_run"  # nothing was measured because nothing was there to measure (e.g. no deployment)
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_NOT_APPLICABLE, STATUS_NOT_RUN)

META_PREFIX = "worthit."


@dataclass(frozen=True)
class Field:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    fields: tuple[Field, ...]
    # Columns added after files of this table were first written: a file lacking one of them (written before it
    # existed) reads it as nulls, and every other column is in every file worthit writes (schemas.write writes
    # them all), so a file lacking it is damaged: its figures would come from nulls. None (a table that does not
    # say): any nullable column may be missing.
    added: tuple[str, ...] | None = None

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field(f.name, f.type, nullable=f.nullable, metadata={"description": f.description})
                for f in self.fields
            ],
            metadata={f"{META_PREFIX}table": self.name},
        )

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    def markdown(self) -> str:
        cols = (("name", "column"), ("type", "type"), ("description", "description"))
        rows = [{"name": f"`{f.name}`", "type": str(f.type), "description": f.description} for f in self.fields]
        return "\n".join([f"### `{self.name}`", "", self.description, "", fmt.markdown_table(rows, cols)])


def column(name: str, typ: pa.DataType, description: str, nullable: bool = True) -> Field:
    """One column of a table definition."""
    return Field(name, typ, description, nullable)


VARIANT = column("variant", pa.string(), "variant name from the study config", False)
