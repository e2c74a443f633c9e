"""The thread-count variables a job's programs see, as the user's shell had them.

Snakemake sets six thread-count variables (``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ...) in every job's
environment to the job's ``threads``. The serving rules declare ``threads: 0`` (a server and its clients
share whatever cores the run has, so a local run fits any ``--cores``), so their programs saw
``OMP_NUM_THREADS=0``: an invalid value that libgomp reports on every start ("Invalid value for environment
variable OMP_NUM_THREADS") and then ignores, and a set variable that keeps vLLM from choosing its own default
(it sets ``OMP_NUM_THREADS=1`` where the variable is unset). The server then ran in an environment no user's
``vllm serve`` has. The Snakefile remembers the user's values (:func:`remember`) before any job starts;
whatever worthit starts in a job gets them back (:func:`restored`): the user's value, or the variable unset.
A value other than ``0`` is the job's real thread count (a cluster profile's ``set-threads``) and is kept.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

# snakemake/shell.py sets these from the job's threads (its list, taken from numpy's and OpenBLAS's docs)
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
SAVED_PREFIX = "WORTHIT_USER_"  # the user's value of each, as the workflow started


def remember(environ: MutableMapping[str, str]) -> None:
    """Keep the user's value of each thread variable under ``WORTHIT_USER_<NAME>`` (once: the workflow's
    first process; a job's own Snakemake, on a cluster, finds them already kept)."""
    for name in THREAD_VARS:
        saved = SAVED_PREFIX + name
        if saved not in environ:
            environ[saved] = environ.get(name, "")


def restored(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) with each thread variable that a ``threads: 0`` job set to
    ``0`` back at the user's value, or unset where the user had none."""
    env = dict(os.environ if environ is None else environ)
    for name in THREAD_VARS:
        if env.get(name) != "0":
            continue
        user = env.get(SAVED_PREFIX + name, "")
        if user and user != "0":
            env[name] = user
        else:
            env.pop(name)
    return env


def restore_here() -> None:
    """Restore this process's own environment (:func:`restored`): for a job's script, before it imports a
    library that reads the variables as it loads (torch, through transformers)."""
    fixed = restored()
    for name in THREAD_VARS:
        if name in fixed:
            os.environ[name] = fixed[name]
        else:
            os.environ.pop(name, None)
