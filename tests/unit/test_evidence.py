"""The compact extracts of the GPU samples' raw results (tests/fixtures/evidence/, tests/evidence.py) hold the
measurements unaltered: every file the extract keeps is the measured one (main's history), byte for byte, or for a
Parquet table its every column, row and metadata entry but the nulled inter-token gaps; and no file it should
keep is missing. Needs the raw results (``pytest -m evidence``)."""

from __future__ import annotations

import io
import tarfile
from pathlib import PurePosixPath

import pyarrow.parquet as pq
import pytest

from tests import evidence

pytestmark = pytest.mark.evidence


@pytest.mark.parametrize("unit", evidence.SAMPLES)
def test_a_compact_extract_holds_the_measured_values(unit: str) -> None:
    full = evidence.sample(unit)
    kept = sorted(
        PurePosixPath(p.relative_to(full).as_posix())
        for p in full.rglob("*")
        if p.is_file() and evidence.kept(PurePosixPath(p.relative_to(full).as_posix()))
    )
    with tarfile.open(evidence.archive(unit)) as tar:
        members = {PurePosixPath(m.name).relative_to(f"examples/{unit}"): m for m in tar.getmembers()}
        assert sorted(members) == kept
        assert any(m.suffix == ".parquet" for m in kept)
        for rel, m in members.items():
            got, want = tar.extractfile(m).read(), (full / rel).read_bytes()  # type: ignore[union-attr]
            if rel.suffix != ".parquet":
                assert got == want, rel
                continue
            a, b = pq.read_table(io.BytesIO(got)), pq.read_table(io.BytesIO(want))
            assert a.schema.metadata == b.schema.metadata, rel
            assert a.column_names == b.column_names, rel
            if evidence.NULLED in a.column_names:
                assert a.column(evidence.NULLED).null_count == a.num_rows, rel
                a, b = a.drop([evidence.NULLED]), b.drop([evidence.NULLED])
            assert a.equals(b), rel
