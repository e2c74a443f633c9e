"""One results folder from several: each comparison measured on its own machine, reported side by side.

A study whose variants cannot all be measured on one machine in one session (a lent GPU's time runs out, a
cluster gives another node each day) is measured in sessions, each with the baseline beside the variants it
judges. ``worthit combine`` copies chosen variants of each session's ``results/<study>`` into one folder, a
variant under a new name where two sessions share one (every session's ``bf16``), so that ``worthit report``
judges each variant against the baseline of its own session (``variants.<v>.baseline`` in the combined study's
config) and every verdict's interval holds one machine's spread (docs/verdicts.md, "The rules", item 7)::

    worthit combine --out results/one-machine \\
        --from results/session-a bf16=bf16_a awq_int4 \\
        --from results/session-b bf16=bf16_b fp8_kv

Nothing measured changes: each Parquet file is copied with its rows and metadata, the variant's name in both
(the ``variant`` column and the ``variant`` key the report checks a file's place against) is the new one, and
``combined_from`` in its metadata records where it came from (the source folder, variant and file). A plain copy
of one variant's file under another's name is still refused by the report; a combined one says what it is.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from worthit import atomic, errors
from worthit.config import load_schema
from worthit.errors import InputError
from worthit.schemas import META_PREFIX
from worthit.schemas.io import read_arrow

COMBINED_FROM = "combined_from"


@dataclass(frozen=True)
class Take:
    """One variant of a source results folder, and the name it gets in the combined folder."""

    results: Path
    variant: str
    name: str


def parse_takes(groups: Sequence[Sequence[str]]) -> list[Take]:
    """``--from RESULTS V[=NEW] ...`` groups -> takes, checked: every source a results folder holding each
    variant named, every new name a valid variant name, no name taken twice."""
    # a new name must be one the combined study's config accepts (config/schema.yaml, variants: propertyNames)
    variant_name = re.compile(load_schema()["properties"]["variants"]["propertyNames"]["pattern"])
    takes: list[Take] = []
    for group in groups:
        if len(group) < 2:
            raise InputError(
                f"--from {' '.join(group)}: give a results folder and at least one variant of it "
                "(--from results/<study> VARIANT[=NEW_NAME] ...)"
            )
        root = Path(group[0])
        have = sorted(p.name.split("~", 1)[1] for p in root.glob("variant~*") if p.is_dir())
        if not root.is_dir() or not have:
            raise InputError(f"--from {root}: not a results folder (no variant~*/ inside)")
        for spec in group[1:]:
            variant, _, name = spec.partition("=")
            name = name or variant
            if variant not in have:
                raise InputError(
                    f"--from {root}: no variant {variant!r} there (no {root / ('variant~' + variant)}/); "
                    f"its variants: {', '.join(have)}"
                )
            if not variant_name.match(name):
                raise InputError(
                    f"--from {root} {spec}: {name!r} is not a variant name (letters, digits, '_', '.', '-', "
                    "starting with a letter or digit)"
                )
            takes.append(Take(root, variant, name))
    seen: dict[str, Take] = {}
    for t in takes:
        if t.name in seen:
            o = seen[t.name]
            raise InputError(
                f"variant name {t.name!r} taken twice: {o.results}'s {o.variant!r} and {t.results}'s {t.variant!r}; "
                f"rename one ({t.variant}=NEW_NAME)"
            )
        seen[t.name] = t
    return takes


def _relabelled(path: Path, take: Take, rel: Path) -> pa.Table:
    arrow = read_arrow(path)
    raw = dict(arrow.schema.metadata or {})
    if f"{META_PREFIX}table".encode() not in raw:
        raise InputError(
            f"{path}: holds no worthit table (no '{META_PREFIX}table' in its metadata): not a result worthit wrote; "
            "move it out of the results folder, then combine again"
        )
    if "variant" in arrow.column_names:
        col = arrow.schema.field("variant")
        arrow = arrow.set_column(
            arrow.column_names.index("variant"), col, pa.array([take.name] * arrow.num_rows, type=col.type)
        )
    raw[f"{META_PREFIX}variant".encode()] = take.name.encode()
    earlier = raw.get(f"{META_PREFIX}{COMBINED_FROM}".encode())
    origin: dict[str, Any] = {"results": str(take.results), "variant": take.variant, "file": str(rel)}
    if earlier:  # combined before: the first source stays the one named, this step is appended
        with contextlib.suppress(json.JSONDecodeError):
            first = json.loads(earlier)
            origin = {**first, "via": origin} if isinstance(first, dict) else origin
    raw[f"{META_PREFIX}{COMBINED_FROM}".encode()] = json.dumps(origin).encode()
    return arrow.replace_schema_metadata(raw)


def combine(takes: Sequence[Take], out: Path, *, replace: bool = False, exclude: Sequence[str] = ()) -> dict[str, int]:
    """Copy each take's Parquet files into ``out/variant~<name>/`` (same relative paths), relabelled; returns
    the number of files per new name. ``exclude``: patterns (fnmatch) of results to leave behind, matched against
    ``<name>/<result>`` (``bf16_a/load/shared_prefix/*``, the result without ``.parquet``). Every file is checked
    before anything is written; each is written whole (a temporary file, then a rename)."""
    plan: list[tuple[Take, Path, Path]] = []
    sources = {(t.results / f"variant~{t.variant}").resolve(): t for t in takes}
    for t in takes:
        src = t.results / f"variant~{t.variant}"
        dest = out / f"variant~{t.name}"
        if dest.resolve() in sources:
            s = sources[dest.resolve()]
            raise InputError(
                f"{dest}: is where {s.variant!r} is taken from ({s.results}): combine into another --out, so no "
                "source is written over"
            )
        if dest.exists() and not replace:
            raise InputError(
                f"{dest}: exists already; remove it, choose another --out, or pass --replace to write over it"
            )
        files = [
            p
            for p in sorted(src.rglob("*.parquet"))
            if p.is_file()
            and not p.name.startswith(".")
            and not any(fnmatch.fnmatchcase(f"{t.name}/{p.relative_to(src).with_suffix('')}", x) for x in exclude)
        ]
        if not files:
            raise InputError(
                f"{src}: no result left to take (no *.parquet{', or --exclude matched them all' if exclude else ''}): "
                f"nothing of {t.variant!r} to combine"
            )
        plan += [(t, f, f.relative_to(src)) for f in files]
    tables = [(t, _relabelled(f, t, rel), out / f"variant~{t.name}" / rel) for t, f, rel in plan]
    for t in takes:  # every file is read (into memory) and checked: only now is an old folder replaced
        shutil.rmtree(out / f"variant~{t.name}", ignore_errors=True)
    counts: dict[str, int] = {}
    for t, arrow, dest in tables:
        with atomic.open_binary(dest) as fh:
            pq.write_table(arrow, fh)
        counts[t.name] = counts.get(t.name, 0) + 1
    return counts


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="worthit combine",
        description="Copy chosen variants of several results folders into one, renaming where two share a name, "
        "so that worthit report judges each against the baseline of its own session (see worthit.combine).",
    )
    ap.add_argument("--out", required=True, help="the combined results folder (created)")
    ap.add_argument(
        "--from",
        dest="groups",
        nargs="+",
        action="append",
        required=True,
        metavar="RESULTS VARIANT[=NEW_NAME]",
        help="a results/<study> folder and the variants to take from it, each under its own name or NEW_NAME "
        "(repeatable)",
    )
    ap.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="PATTERN",
        help="leave out the results matching NEW_NAME/RESULT (shell pattern, e.g. 'bf16_a/load/shared_prefix/*'; "
        "repeatable)",
    )
    ap.add_argument("--replace", action="store_true", help="write over variant folders already in --out")
    a = ap.parse_args(argv)
    try:
        takes = parse_takes(a.groups)
        counts = combine(takes, Path(a.out), replace=a.replace, exclude=a.exclude)
    except InputError as e:
        return errors.report("worthit combine", e)
    for t in takes:
        label = t.variant if t.name == t.variant else f"{t.variant} as {t.name}"
        print(f"{t.results}: {label}: {counts[t.name]} file(s)")
    print(
        f"combined {sum(counts.values())} file(s) of {len(counts)} variant(s) into {a.out}; render it with "
        f"worthit report --results {a.out} --configfile CONFIG, where each variant's baseline: names the "
        "baseline of its own session"
    )
    return 0
