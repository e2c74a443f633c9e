"""The flags the installed vLLM accepts, from its own ``vllm serve --help=all``, cached per vLLM version.

Not a list of ours: the serve environment's vLLM is asked once per version (about 13 s on CPU), its option
lines parsed, and the set kept under the user's cache (``$WORTHIT_CACHE_DIR``, else
``$XDG_CACHE_HOME/worthit`` or ``~/.cache/worthit``; ``vllm-flags/<version>.json``), shared by every study
and test on the machine. Two users of it: ``worthit tune`` refuses a space key whose flag is not accepted
(:mod:`worthit.tune.flags`), and the server supervisor refuses to start a variant whose engine
arguments vLLM would misread (:func:`problems`): a misspelt flag, or an abbreviation, which vLLM's argument parser takes
for the full flag (``max-num-seq: 8`` serves ``--max-num-seqs 8``) while worthit reads the full name only.
Standard library only (and :mod:`worthit.errors`, :mod:`worthit.atomic`, :mod:`worthit.engine_args`,
:mod:`worthit.compile_cache`, which are too): the supervisor runs it.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worthit import atomic
from worthit import engine_args as eargs
from worthit.compile_cache import dist_info_version, site_packages, vllm_version
from worthit.errors import InputError

CACHE_ENV = "WORTHIT_CACHE_DIR"
HELP_TIMEOUT_S = 300
# an option line of argparse's help: two spaces, then the option strings ("--max-num-seqs MAX_NUM_SEQS",
# "--enable-chunked-prefill, --no-enable-chunked-prefill", "--speculative-config SPEC, -sc SPEC")
_OPTION_LINE = re.compile(r"^ {2}(-{1,2}[A-Za-z0-9].*)$")
_LONG = re.compile(r"(?:^|,\s*)--([A-Za-z0-9][A-Za-z0-9_.-]*)")


def cache_dir() -> Path:
    """Where the accepted flags of each vLLM version are kept (see the module's docstring)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]) / "vllm-flags"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "worthit" / "vllm-flags"


class FlagsUnavailable(InputError):
    """``vllm serve --help=all`` could not be run or read."""


def parse_help(text: str) -> set[str]:
    """The long flags (without ``--``) that a ``vllm serve --help=all`` text declares on its option lines."""
    out: set[str] = set()
    for line in text.splitlines():
        m = _OPTION_LINE.match(line)
        if m:
            out.update(_LONG.findall(m.group(1)))
    out.discard("help")
    return out


def help_text(python: str) -> str:
    """``vllm serve --help=all`` of the vLLM installed for ``python``."""
    argv = [python, "-m", "vllm.entrypoints.cli.main", "serve", "--help=all"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=HELP_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError) as e:
        raise FlagsUnavailable(f"could not run {' '.join(argv)}: {e} (envs.serve_python names the serve env)") from None
    if done.returncode != 0 or not parse_help(done.stdout):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise FlagsUnavailable(f"{' '.join(argv)} exited {done.returncode}: {tail[0]}")
    return done.stdout


def accepted_flags(python: str, cache: Path | None = None) -> tuple[str, set[str]]:
    """(vLLM version, the flags it accepts), read from the cache (``cache``, else :func:`cache_dir`) for that
    version or asked and cached."""
    version = vllm_version(python)
    path = _cache_file(version, cache)
    if version != "unknown" and path.exists():
        try:
            return version, set(json.loads(path.read_text())["flags"])
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache is asked again
    flags = parse_help(help_text(python))
    if version != "unknown":
        _keep(path, version, flags)
    return version, flags


def _cache_file(version: str, cache: Path | None) -> Path:
    return (cache or cache_dir()) / f"{re.sub(r'[^A-Za-z0-9_.+-]', '_', version)}.json"


def _keep(path: Path, version: str, flags: set[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps({"vllm": version, "flags": sorted(flags)}, indent=0) + "\n")


def remember(python: str, help_text_: str, cache: Path | None = None) -> Path | None:
    """Keep the flags of a ``vllm serve --help=all`` text already at hand as ``python``'s vLLM's (the device
    machines' warm-up runs it while the model converts, so the first server does not wait for it); the cache
    file, None when the version or the flags cannot be told."""
    version, flags = vllm_version(python), parse_help(help_text_)
    if version == "unknown" or not flags:
        return None
    path = _cache_file(version, cache)
    _keep(path, version, flags)
    return path


def hint(name: str, accepted: set[str]) -> str:
    """The closest accepted flags to ``name``, as a phrase for an error message."""
    close = difflib.get_close_matches(name, sorted(accepted), n=3, cutoff=0.6)
    return f"closest accepted: {', '.join(close)}" if close else "see vllm serve --help=all"


def installed_version(python: str) -> str | None:
    """The vLLM version whose ``vllm-*.dist-info`` lies in ``python``'s environment or on ``PYTHONPATH`` (how
    the device machines install it), without running anything; None where none is found (an interpreter
    that is not a vLLM environment: nothing to ask)."""
    path = [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dist_info_version([*site_packages(python), *path])


def served_flags(python: str) -> tuple[str, set[str]] | None:
    """(version, accepted flags) of the vLLM that ``python`` serves with, for the supervisor's check; None
    where ``python``'s environment holds no vLLM (:func:`installed_version`), so nothing is run that might
    not answer. Cached as :func:`accepted_flags`."""
    if installed_version(python) is None:
        return None
    return accepted_flags(python)


def problems(args: Mapping[str, Any] | None, accepted: set[str], *, version: str) -> list[str]:
    """What vLLM ``version`` would refuse or misread in engine arguments ``args``, one sentence each: a flag it
    does not declare (an abbreviation too: its parser would take ``--max-num-seq`` for ``--max-num-seqs``,
    which worthit, reading full names, would not see), and a ``false`` for a flag with no ``--no-`` form
    (:func:`worthit.server.engine_flags` gives false as that form). Empty when every argument is served as
    written."""
    out: list[str] = []
    for key, value in (args or {}).items():
        name = eargs.flag(key)
        if value is None:
            continue  # left out of the command line
        if name not in accepted:
            out.append(f"engine argument '{key}': vLLM {version} has no flag --{name} ({hint(name, accepted)})")
        elif value is False and (off := eargs.negative_form(name)) is not None and off not in accepted:
            out.append(
                f"engine argument '{key}: false': vLLM {version}'s --{name} has no --no-{name} form; write null "
                "to leave the flag out"
            )
    return out
