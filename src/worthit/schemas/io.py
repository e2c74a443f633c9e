"""Reading and writing the tables: files are written atomically (temp file + rename) with provenance and a
status in the key-value metadata, so a failed experiment is a file too: zero rows, ``status`` = ``failed`` /
``not_applicable`` and its reason and log tail. Reads check that a file holds the table it claims to."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from worthit import atomic, secrets
from worthit.errors import InputError
from worthit.schemas.definition import META_PREFIX, STATUS_FAILED, STATUS_OK, STATUSES, Table


class SchemaError(InputError):
    """A Parquet file does not match the table it claims to be."""


# what a damaged result file's message says to do (a file worthit wrote always matches its table)
DAMAGED = (
    "; worthit writes every column of its table, so the file was damaged or rewritten by another tool: delete it "
    "and run snakemake again to measure it anew"
)


class UnreadableFile(InputError):
    """A file is not Parquet at all (cut short, overwritten, not written by worthit): not a schema mismatch,
    which a reader may answer by reading the file raw."""


@contextlib.contextmanager
def _readable(path: str | os.PathLike[str]) -> Iterator[None]:
    """pyarrow's error on a file that is not Parquet becomes :class:`UnreadableFile` naming it and what to
    do (a missing file stays :class:`FileNotFoundError`)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as e:
        raise UnreadableFile(
            f"{path}: not a readable Parquet file ({e}); worthit writes each result whole (a temporary file, "
            "then a rename), so it was damaged or replaced afterwards: delete it and run snakemake again to "
            "measure it anew"
        ) from None


def _decoded(raw: Mapping[bytes, bytes] | None) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (raw or {}).items()}


def read_arrow(path: str | os.PathLike[str]) -> pa.Table:
    """The whole Parquet file as Arrow, or :class:`UnreadableFile`."""
    with _readable(path):
        return pq.read_table(path)


def read_file_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The Parquet file's key-value metadata (its footer alone), decoded, or :class:`UnreadableFile`."""
    with _readable(path):
        return _decoded(pq.read_schema(path).metadata)


def _encode_meta(meta: Mapping[str, Any]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for k, v in meta.items():
        key = k if k.startswith(META_PREFIX) else META_PREFIX + k
        out[key.encode()] = (v if isinstance(v, str) else json.dumps(v, default=str)).encode()
    return out


def to_arrow(table: Table, rows: Sequence[Mapping[str, Any]] | Any) -> pa.Table:
    """Rows (a list of dicts or a pandas DataFrame) -> an Arrow table with exactly the table's columns."""
    if hasattr(rows, "to_dict"):  # a DataFrame
        rows = rows.to_dict("records")
    rows = list(rows)
    unknown = {k for r in rows for k in r} - set(table.columns)
    if unknown:
        raise SchemaError(f"table {table.name}: unknown columns {sorted(unknown)}; allowed: {table.columns}")
    cols = {f.name: [r.get(f.name) for r in rows] for f in table.fields}
    return pa.Table.from_pydict(cols, schema=table.schema)


def write(
    path: str | os.PathLike[str],
    table: Table,
    rows: Sequence[Mapping[str, Any]] | Any = (),
    *,
    status: str = STATUS_OK,
    reason: str | None = None,
    log_tail: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write rows atomically: a temp file in the same folder, fsync, then rename over ``path``."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r} not in {STATUSES}")
    arrow = to_arrow(table, rows)
    meta = dict(arrow.schema.metadata or {})
    # nothing secret is written (worthit.secrets; docs/security.md): keys, tokens, URL credentials
    said = {"status": status, "reason": reason or "", "log_tail": log_tail or ""}
    meta.update(_encode_meta(secrets.redact(said)))
    meta.update(_encode_meta(secrets.redact(dict(metadata or {}))))
    arrow = arrow.replace_schema_metadata(meta)
    path = Path(path)
    with atomic.open_binary(path) as fh:
        pq.write_table(arrow, fh)
    return path


def write_failure(
    path: str | os.PathLike[str],
    table: Table,
    reason: str,
    *,
    log_tail: str = "",
    status: str = STATUS_FAILED,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """A failed (or not applicable) experiment: zero rows, the reason and the log tail in metadata."""
    return write(path, table, [], status=status, reason=reason, log_tail=log_tail, metadata=metadata)


@dataclass(frozen=True)
class Result:
    """A table read back: its rows as Arrow, its status and its decoded metadata."""

    table: pa.Table
    status: str
    reason: str
    log_tail: str
    metadata: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    def to_pandas(self) -> Any:
        return self.table.to_pandas()


def read(path: str | os.PathLike[str], table: Table) -> Result:
    """Read a file written by :func:`write`, checking it is the expected table."""
    arrow = read_arrow(path)
    meta = _decoded(arrow.schema.metadata)
    name = meta.get(f"{META_PREFIX}table")
    if name != table.name:
        raise SchemaError(f"{path}: holds table {name!r}, expected {table.name!r}")
    missing = [f for f in table.fields if f.name not in arrow.column_names]
    lacking = sorted(f.name for f in missing if not f.nullable or f.name not in (table.added or [f.name]))
    if lacking:
        raise SchemaError(f"{path}: table {table.name} lacks columns {lacking}{DAMAGED}")
    for f in missing:  # a nullable column added after the file was written reads as nulls
        arrow = arrow.append_column(pa.field(f.name, f.type), pa.nulls(arrow.num_rows, f.type))
    for f in table.fields:  # a column of another type: converted where that is exact, else named
        found = arrow.schema.field(f.name).type
        if found.equals(f.type):
            continue
        try:
            converted = arrow.column(f.name).cast(f.type, safe=True)
        except (pa.ArrowException, ValueError):
            raise SchemaError(
                f"{path}: table {table.name}: column {f.name!r} holds {found}, expected {f.type}{DAMAGED}"
            ) from None
        arrow = arrow.set_column(arrow.column_names.index(f.name), pa.field(f.name, f.type), converted)
    decoded: dict[str, Any] = {}
    for k, v in meta.items():
        if not k.startswith(META_PREFIX):
            continue
        try:
            decoded[k[len(META_PREFIX) :]] = json.loads(v)
        except json.JSONDecodeError:
            decoded[k[len(META_PREFIX) :]] = v
    return Result(
        table=arrow.select(table.columns),
        status=str(decoded.get("status", STATUS_OK)),
        reason=str(meta.get(f"{META_PREFIX}reason", "")),
        log_tail=str(meta.get(f"{META_PREFIX}log_tail", "")),
        metadata=decoded,
    )
