"""Result paths parsed back into what they hold (one parser for every aggregate adapter).

The workflow writes ``results/<study>/variant~<v>/<experiment>.parquet``: ``kv``, ``load/conc~16``,
``load/conc~16.rep~2`` (run 2 of that level, see ``loadtest.repeats``), ``prefix/len~1500``,
``specdec/verify``, ``accuracy``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

_RESULT = re.compile(
    r"variant~(?P<variant>[^/]+)/(?P<experiment>[^~]+?(?:~(?P<value>\d+)(?:\.rep~(?P<run>\d+))?)?)"
    r"\.parquet$"
)


@dataclass(frozen=True)
class ResultPath:
    variant: str
    experiment: str  # below the variant folder, without .parquet: load/conc~16.rep~2
    value: int | None  # the level, prefix length, ... of a swept experiment
    run: int = 1  # the run of a repeated load level

    @property
    def kind(self) -> str:
        """The experiment without its swept value: load/conc, prefix/len, kv, accuracy."""
        return self.experiment.split("~", 1)[0]


def parse(path: str | PurePath) -> ResultPath:
    m = _RESULT.search(PurePath(path).as_posix())
    if not m:
        raise ValueError(f"{path}: not a result path (results/<study>/variant~<v>/<experiment>.parquet)")
    return ResultPath(
        m["variant"], m["experiment"], int(m["value"]) if m["value"] else None, int(m["run"]) if m["run"] else 1
    )


def manifest_path(model: str) -> str:
    """A model's manifest, relative to the workflow's working directory (the fetch and quantise rules' output)."""
    return f"resources/models/{model}/manifest.json"
