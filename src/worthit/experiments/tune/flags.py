"""The flags the installed vLLM accepts, from its own ``vllm serve --help=all``, cached per vLLM version.

Not a list of ours: the serve environment's vLLM is asked once per version (about 13 s on CPU), its option
lines parsed, and the set kept under ``resources/vllm-flags/<version>.json``. A space key whose flag is not
accepted is refused with the closest accepted ones (:mod:`difflib`).
"""

from __future__ import annotations

import difflib
import json
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from worthit import atomic
from worthit.compile_cache import vllm_version
from worthit.config import ConfigError

CACHE_DIR = "resources/vllm-flags"  # relative to the working directory, as resources/vllm-cache is
HELP_TIMEOUT_S = 300
# an option line of argparse's help: two spaces, then the option strings ("--max-num-seqs MAX_NUM_SEQS",
# "--enable-chunked-prefill, --no-enable-chunked-prefill", "--speculative-config SPEC, -sc SPEC")
_OPTION_LINE = re.compile(r"^ {2}(-{1,2}[A-Za-z0-9].*)$")
_LONG = re.compile(r"(?:^|,\s*)--([A-Za-z0-9][A-Za-z0-9_.-]*)")


class FlagsUnavailable(ConfigError):
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


def accepted_flags(python: str, cache_dir: Path = Path(CACHE_DIR)) -> tuple[str, set[str]]:
    """(vLLM version, the flags it accepts), read from the cache for that version or asked and cached."""
    version = vllm_version(python)
    safe = re.sub(r"[^A-Za-z0-9_.+-]", "_", version)
    path = cache_dir / f"{safe}.json"
    if version != "unknown" and path.exists():
        try:
            return version, set(json.loads(path.read_text())["flags"])
        except (ValueError, KeyError, TypeError):
            pass  # a damaged cache is asked again
    flags = parse_help(help_text(python))
    if version != "unknown":
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, json.dumps({"vllm": version, "flags": sorted(flags)}, indent=0) + "\n")
    return version, flags


def check_flags(keys: Iterable[str], accepted: set[str], *, version: str, source: str = "config") -> None:
    """Refuse a space key whose flag (the part before a dot) this vLLM does not accept."""
    for key in keys:
        name = key.split(".", 1)[0]
        if name in accepted:
            continue
        close = difflib.get_close_matches(name, sorted(accepted), n=3, cutoff=0.6)
        hint = f"closest accepted: {', '.join(close)}" if close else "see vllm serve --help=all"
        raise ConfigError(f"{source}: key 'tune.space.{key}': vLLM {version} has no flag --{name} ({hint})")
