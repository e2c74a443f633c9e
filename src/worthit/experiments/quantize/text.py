"""The texts quantisation reads: the calibration windows (from the project's text, a file or a hub dataset)
and the quality gate's held-out text. The project's own texts are ``worthit/data/*.jsonl``."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from worthit.experiments.quantize.spec import CalibrationText, QuantizeError

DATA = Path(__file__).resolve().parents[2] / "data"  # src/worthit/data
CALIBRATION_FILE = DATA / "calibration.jsonl"
HELDOUT_FILE = DATA / "heldout.jsonl"


def read_texts(path: Path, column: str = "text") -> list[str]:
    """A .jsonl file (one object per line, text in ``column``) or a plain text file (one text)."""
    if path.suffix == ".jsonl":
        return [json.loads(line)[column] for line in path.read_text().splitlines() if line.strip()]
    return [path.read_text()]


def calibration_texts(cal: CalibrationText) -> list[str]:
    if cal.dataset == "builtin":
        return read_texts(CALIBRATION_FILE)
    if cal.dataset.startswith("file:"):
        return read_texts(Path(cal.dataset[5:]).expanduser(), cal.text_column)
    from datasets import load_dataset  # a hub dataset: honours HF_ENDPOINT / HF_DATASETS_OFFLINE

    ds = load_dataset(cal.dataset, split=cal.split)
    texts: list[str] = []
    for row in ds:
        if row.get(cal.text_column):
            texts.append(str(row[cal.text_column]))
        if len(texts) >= cal.samples * 4:  # plenty to fill samples x seq_len windows
            break
    return texts


def token_windows(token_lists: Sequence[Sequence[int]], samples: int, seq_len: int) -> list[list[int]]:
    """Concatenate the tokenised texts and cut ``samples`` windows of ``seq_len`` tokens (wrapping
    around when the texts are shorter than samples x seq_len)."""
    stream = [t for toks in token_lists for t in toks]
    if not stream:
        raise QuantizeError("calibration set is empty")
    need = samples * seq_len
    while len(stream) < need:
        stream = stream + stream
    return [stream[i * seq_len : (i + 1) * seq_len] for i in range(samples)]
