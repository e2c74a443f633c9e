"""Result paths parsed back into what they hold (one parser for every aggregate adapter).

The workflow writes ``results/<study>/variant~<v>/<experiment>.parquet``: ``kv``, ``load/conc~16``,
``load/conc~16.rep~2`` (run 2 of that level, see ``loadtest.repeats``), ``load/rate~2.5`` (an open-loop
level), ``load/chat/conc~4`` and ``load/prod/replay`` (levels naming a workload, see
:mod:`worthit.loadgen.levels`), ``prefix/len~1500``, ``specdec/verify``, ``accuracy``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

_RESULT = re.compile(
    r"variant~(?P<variant>[^/]+)/(?P<experiment>[^~]+?(?:~(?P<value>\d+(?:\.\d+)?))?(?:\.rep~(?P<run>\d+))?)"
    r"\.parquet$"
)


@dataclass(frozen=True)
class ResultPath:
    variant: str
    experiment: str  # below the variant folder, without .parquet: load/conc~16.rep~2
    value: int | float | None  # the level, prefix length, ... of a swept experiment (a rate may be fractional)
    run: int = 1  # the run of a repeated load level

    @property
    def kind(self) -> str:
        """The experiment without its swept value: load/conc, prefix/len, kv, accuracy."""
        return re.sub(r"\.rep~\d+$", "", self.experiment).split("~", 1)[0]


def parse(path: str | PurePath) -> ResultPath:
    m = _RESULT.search(PurePath(path).as_posix())
    if not m:
        raise ValueError(f"{path}: not a result path (results/<study>/variant~<v>/<experiment>.parquet)")
    value = m["value"]
    number = None if not value else float(value) if "." in value else int(value)
    return ResultPath(m["variant"], m["experiment"], number, int(m["run"]) if m["run"] else 1)


def manifest_path(model: str) -> str:
    """A model's manifest, relative to the workflow's working directory (the fetch and quantise rules' output)."""
    return f"resources/models/{model}/manifest.json"
