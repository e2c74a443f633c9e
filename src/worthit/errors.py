"""Bad input a user can fix, and how it reaches them.

Every error worthit raises for a bad config key, an unreadable or malformed file, or an impossible plan
subclasses :class:`InputError`; its message names the file, the key and the allowed values. The command line
(:func:`report`) and the workflow's scripts (:func:`install_hook`, through ``stages.setup_logging``) print that
message alone, never a traceback; any other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

import logging
import sys
from types import TracebackType


class InputError(ValueError):
    """Input the user must change: the message says which file and key, and what is allowed."""


def report(prog: str, e: InputError) -> int:
    """Print ``e`` for a command-line user; the exit status a command returns for bad input."""
    print(f"{prog}: error: {e}", file=sys.stderr)
    return 2


def _hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    if isinstance(value, InputError):
        logging.getLogger("worthit").error("%s", value)
        print(f"error: {value}", file=sys.stderr)
        return
    sys.__excepthook__(kind, value, tb)


def install_hook() -> None:
    """An uncaught :class:`InputError` in this process ends it with its message (exit status 1)."""
    sys.excepthook = _hook
