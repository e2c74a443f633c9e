"""Reading a study's results for the report: every Parquet file through the schema module.

Files are grouped by variant (the ``variant~NAME`` folder of their path), by recommended deployment
(``deployment~SCENARIO``: its validation runs) and by the table named in their metadata, so experiments
added later (new tables in :mod:`worthit.schemas`) arrive here without a change; a file of an unknown
table is kept raw and listed, never an error. Failed and not-applicable results keep their reason, with
the root-cause line of their log where the reason is a generic one (a server that "exited before it
became ready"), and their log tail.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from worthit import measurements, paths, prom, schemas
from worthit.loadgen.levels import CONC
from worthit.server import startup_error


@dataclass(frozen=True)
class Loaded:
    """One result file read back."""

    path: str
    variant: str | None
    experiment: str  # the path below the variant folder without .parquet, e.g. load/conc~4
    table: str
    status: str
    reason: str
    log_tail: str
    metadata: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return self.status == schemas.STATUS_OK

    @property
    def cause(self) -> str:
        """The reason, or the root-cause line of the log tail when the reason does not name one."""
        root = startup_error(self.log_tail) if self.log_tail else None
        if root and root not in self.reason:
            return f"{self.reason}: {root}" if self.reason else root
        return self.reason


@dataclass
class VariantResults:
    name: str
    files: list[Loaded] = field(default_factory=list)

    def of(self, table: str) -> list[Loaded]:
        return [f for f in self.files if f.table == table]

    def failures(self) -> list[Loaded]:
        return [f for f in self.files if not f.ok]

    def first_row(self, table: str) -> dict[str, Any] | None:
        """The first row of the variant's first successful file of ``table`` (a one-row table: the KV probe's)."""
        for f in self.of(table):
            if f.ok and f.rows:
                return f.rows[0]
        return None

    def _level_files(self) -> list[Loaded]:
        """The files of the variant's load levels: of the tables the experiments declare as levels."""
        tables = measurements.level_tables()
        return [f for f in self.files if f.table in tables]

    def levels(self) -> dict[int, list[Loaded]]:
        """Load levels by concurrency; several files for one level are repeats.

        Only the study's closed-loop levels of its default workload: open-loop rate and trace-replay levels
        (``level_kind`` other than concurrency) and levels of a named workload are summarised on their own
        (summary.md) and are not comparable with them."""
        out: dict[int, list[Loaded]] = {}
        for f in self._level_files():
            if f.metadata.get("level_kind", CONC) != CONC or f.metadata.get("workload_name"):
                continue
            c = f.metadata.get("concurrency")
            if c is None and f.rows:
                c = f.rows[0].get("concurrency")
            if c is None:
                continue
            out.setdefault(int(c), []).append(f)
        return dict(sorted(out.items()))

    def workload_levels(self) -> dict[str, list[Loaded]]:
        """Closed-loop levels that name their own workload (loadtest.workload_levels: load/chat/conc~4) by level
        name; several files for one level are repeats. Two variants that measured the same one are compared
        on it (a conversation level judges prefix caching on realistic reuse)."""
        out: dict[str, list[Loaded]] = {}
        for f in self._level_files():
            md = f.metadata
            if md.get("level_kind") == CONC and md.get("level_workload") and md.get("level"):
                out.setdefault(str(md["level"]), []).append(f)
        return dict(sorted(out.items()))

    def provenance(self) -> dict[str, Any]:
        for f in self.files:
            if f.metadata.get("model") or f.metadata.get("engine_args"):
                return f.metadata
        return self.files[0].metadata if self.files else {}

    @property
    def status(self) -> tuple[str, str]:
        """ok unless every result failed; then the first failure's status and its cause."""
        if not self.files or any(f.ok for f in self.files):
            return schemas.STATUS_OK, ""
        first = next((f for f in self.files if f.status == schemas.STATUS_NOT_APPLICABLE), self.files[0])
        return first.status, first.cause


@dataclass
class StudyResults:
    variants: dict[str, VariantResults]
    summary: Loaded | None = None
    aggregates: dict[str, Loaded] = field(default_factory=dict)  # study-level tables by name
    deployments: dict[str, list[Loaded]] = field(default_factory=dict)  # validation runs by scenario

    def variant(self, name: str) -> VariantResults:
        return self.variants.setdefault(name, VariantResults(name))

    def all_files(self) -> list[Loaded]:
        return [f for v in self.variants.values() for f in v.files]


def _variant_and_experiment(path: Path) -> tuple[str | None, str]:
    parts = path.with_suffix("").parts
    for i, p in enumerate(parts):
        if p.startswith("variant~"):
            return p.split("~", 1)[1], "/".join(parts[i + 1 :])
    return None, path.stem


def _deployment(path: Path) -> str | None:
    """The scenario of a validation run (``deployment~<scenario>/load*.parquet``), else None."""
    return next((p.split("~", 1)[1] for p in path.parts if p.startswith("deployment~")), None)


def read_result(path: str | os.PathLike[str]) -> Loaded:
    return _shared_server(_read_result(Path(path)))


def _shared_server(f: Loaded) -> Loaded:
    """A run that shared its server with another client (:func:`worthit.prom.other_traffic`) is no evidence:
    its latencies and counters carry that client's load. It reads as failed, with the reason, so every
    verdict leaves it out and the report lists it with what to do."""
    traffic = f.metadata.get("traffic") if f.ok else None
    if isinstance(traffic, dict) and traffic.get("shared"):
        return replace(f, status=schemas.STATUS_FAILED, reason=prom.traffic_reason(traffic))
    return f


def _check_place(path: Path, variant: str | None, meta: Mapping[str, Any]) -> None:
    """A result file at another's place (a copy of one variant's or level's file over another's result path)
    is named: its metadata says which variant, concurrency and run it measured, and the path must agree, or
    the report would read that run as this one's."""
    said = meta.get("variant")
    if variant is not None and said is not None and str(said) != variant:
        raise schemas.SchemaError(
            f"{path}: holds the result of variant {said!r}, not of {variant!r} (a copy over this path?): delete it and "
            "run snakemake again to measure it anew (to bring one variant's results under another name, use "
            "worthit combine)"
        )
    try:
        place = paths.parse(path)
    except ValueError:  # not named as a result (a stray copy): nothing its name claims
        return
    if place.kind != "load/conc" or meta.get("concurrency") is None:
        return
    said_conc, said_run = int(meta["concurrency"]), int(meta.get("repeat") or 1)
    if (said_conc, said_run) != (place.value, place.run):
        raise schemas.SchemaError(
            f"{path}: holds the run at concurrency {said_conc} (run {said_run}), not concurrency {place.value} "
            f"(run {place.run}) its name says (a copy over this path?): delete it and run snakemake again to "
            "measure it anew"
        )


def _read_result(path: Path) -> Loaded:
    measurements.load_plugins()  # every experiment's tables in schemas.TABLES
    meta = schemas.read_file_metadata(path)
    name = meta.get(f"{schemas.META_PREFIX}table", "")
    variant, experiment = _variant_and_experiment(path)
    if not name:
        raise schemas.SchemaError(
            f"{path}: holds no worthit table (no '{schemas.META_PREFIX}table' in its metadata), so it is no result "
            "worthit wrote, or another tool rewrote it without its metadata: delete it and run snakemake again to "
            "measure it anew (or move a file of your own out of the results folder)"
        )
    if name in schemas.TABLES:
        # a damaged file (a column missing or of another type) is named: SchemaError (columns added later read as
        # nulls: Table.added)
        res = schemas.read(path, schemas.TABLES[name])
        _check_place(path, variant, res.metadata)
        return Loaded(
            str(path),
            variant or res.metadata.get("variant"),
            experiment,
            name,
            res.status,
            res.reason,
            res.log_tail,
            res.metadata,
            res.table.to_pylist(),
        )
    arrow = schemas.read_arrow(path)  # a table this version does not define (a plugin's not loaded): keep it raw
    decoded: dict[str, Any] = {}
    for k, v in meta.items():
        if k.startswith(schemas.META_PREFIX):
            try:
                decoded[k[len(schemas.META_PREFIX) :]] = json.loads(v)
            except json.JSONDecodeError:
                decoded[k[len(schemas.META_PREFIX) :]] = v
    rows = arrow.to_pylist()
    return Loaded(
        str(path),
        variant or decoded.get("variant"),
        experiment,
        name,
        str(decoded.get("status", "ok")),
        str(meta.get(f"{schemas.META_PREFIX}reason", "")),
        str(meta.get(f"{schemas.META_PREFIX}log_tail", "")),
        decoded,
        rows,
    )


def load(
    paths: Iterable[str | os.PathLike[str]],
    summary: str | os.PathLike[str] | None = None,
    variants: Iterable[str] = (),
) -> StudyResults:
    """Read result files (any order) and the aggregate summary into one :class:`StudyResults`."""
    study = StudyResults({v: VariantResults(v) for v in variants})
    for p in paths:
        scenario = _deployment(Path(p))
        if scenario is not None:
            study.deployments.setdefault(scenario, []).append(read_result(p))
            continue
        f = read_result(p)
        if f.variant is None:
            study.aggregates[f.table] = f
            continue
        study.variant(f.variant).files.append(f)
    if summary is not None and Path(summary).exists():
        study.summary = read_result(summary)
        study.aggregates[study.summary.table] = study.summary
    return study


def result_paths(
    results_dir: str | os.PathLike[str], expected: Mapping[str, Iterable[str]] | None = None
) -> tuple[list[Path], list[Path]]:
    """(the result files to read, those left out) below ``results/<study>/``: every Parquet file of the variant
    folders, the validation runs (``deployment~*/``) and the study-level tables beside them.

    With ``expected`` ({variant: its result files below its folder, without .parquet: ``Study.result_files``}),
    a file that its variant's list does not name is left out, as the workflow's report leaves it out (a stray
    copy, a level or run the config no longer measures), and so are the folders of variants the study does not
    name (one dropped from the config, another study's copied in) and a validation run's file not named
    ``load[.rep~N].parquet``."""
    root = Path(results_dir)
    found = sorted(root.glob("variant~*/**/*.parquet")) + sorted(root.glob("deployment~*/*.parquet"))
    keep: list[Path] = []
    left: list[Path] = []
    for p in found:
        variant, experiment = _variant_and_experiment(p.relative_to(root))
        if expected is None:
            keep.append(p)
        elif variant is not None:
            (keep if experiment in set(expected.get(variant, ())) else left).append(p)
        elif variant is None and _deployment(p.relative_to(root)) is not None:
            (keep if _VALIDATION_RUN.fullmatch(p.name) else left).append(p)
        else:
            keep.append(p)
    keep += [p for p in sorted(root.glob("*.parquet")) if p.name != "summary.parquet"]
    return keep, left


_VALIDATION_RUN = re.compile(r"load(\.rep~[0-9]+)?\.parquet")


def load_dir(
    results_dir: str | os.PathLike[str],
    variants: Iterable[str] = (),
    expected: Mapping[str, Iterable[str]] | None = None,
) -> StudyResults:
    """Every Parquet file below ``results/<study>/`` (:func:`result_paths`) and its summary."""
    root = Path(results_dir)
    summary = root / "summary.parquet"
    return load(result_paths(root, expected)[0], summary if summary.exists() else None, variants)
