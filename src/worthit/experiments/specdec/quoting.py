"""A workload whose answers quote their input: where prompt lookup (ngram speculative decoding) pays on real text.

An ngram drafter proposes the tokens that followed the last few tokens the last time they occurred in the prompt
or the output so far. On plain chat the answer rarely repeats the question, so it seldom proposes; on an editing
task (add type hints to this function, fix the typo in this paragraph) the answer is mostly the input again, and
it proposes, and is accepted, at most steps. This module writes such tasks as a ``jsonl`` workload (one
``{"messages": [...], "output_tokens": N}`` a line, what ``workloads.<name>.kind: jsonl`` reads), made offline
and deterministically from source files that ship with Python's standard library:

- ``code``: "Rewrite this function with type hints": a top-level function of a standard-library module, quoted
  whole (between 6 and 40 lines);
- ``text``: "Fix the typo in this text": the first paragraph of a standard-library function's docstring, with
  two neighbouring letters of one of its words swapped (the seed picks which).

The prompts are real text a model can answer, not a sample of any user's traffic: a chat workload (ShareGPT) says
what conversation costs, this one where prompt lookup pays (docs/experiments.md, "Speculative decoding").

Usage: ``python -m worthit.experiments.specdec.quoting OUT.jsonl [--items N] [--seed S] [--output-tokens T]``.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import random
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from worthit import atomic

# Pure-Python standard-library modules with plain, self-contained functions (the same files on every platform).
MODULES = (
    "textwrap",
    "shlex",
    "fnmatch",
    "string",
    "colorsys",
    "bisect",
    "calendar",
    "glob",
    "posixpath",
    "statistics",
    "html",
    "base64",
    "difflib",
    "heapq",
    "quopri",
    "wave",
    "csv",
    "ipaddress",
    "fractions",
)
CODE_PROMPT = (
    "Rewrite this Python function with type hints. Keep everything else as it is and reply with the code only."
)
TEXT_PROMPT = "Fix the typo in this text. Reply with the corrected text only."
MIN_LINES, MAX_LINES = 6, 40
MIN_WORDS = 25


def _source(module: str) -> str | None:
    """The source of a standard-library module, or None where this Python has no such pure-Python file."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    path = getattr(mod, "__file__", None)
    if not path or not str(path).endswith(".py"):
        return None
    return Path(path).read_text(encoding="utf-8")


def functions(module: str) -> Iterator[tuple[str, str, str | None]]:
    """(name, source, docstring) of each top-level function of ``module``, in file order."""
    src = _source(module)
    if src is None:
        return
    lines = src.splitlines()
    for node in ast.parse(src).body:
        if isinstance(node, ast.FunctionDef) and node.end_lineno is not None:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            yield node.name, "\n".join(lines[start : node.end_lineno]), ast.get_docstring(node)


def typo(text: str, rng: random.Random) -> str:
    """``text`` with two neighbouring letters of one of its words (of 5 or more letters) swapped."""
    words = [i for i, w in enumerate(text.split(" ")) if len(w) >= 5 and w.isalpha()]
    if not words:
        raise ValueError("no word of 5 or more letters to misspell")
    parts = text.split(" ")
    i = rng.choice(words)
    w = parts[i]
    j = rng.randrange(1, len(w) - 2)
    while w[j] == w[j + 1] and j < len(w) - 2:  # a swap of equal letters changes nothing
        j += 1
    parts[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :]
    return " ".join(parts)


def _paragraph(doc: str | None) -> str | None:
    """A docstring's first paragraph on one line, when it is prose of at least MIN_WORDS words."""
    if not doc:
        return None
    para = " ".join(doc.strip().split("\n\n")[0].split())
    if len(para.split()) < MIN_WORDS or any(c in para for c in ">`{}[]"):
        return None
    return para


def items(n: int = 64, *, seed: int = 0, output_tokens: int = 64) -> list[dict[str, Any]]:
    """``n`` editing tasks, code and text alternating, drawn in a seeded order from :data:`MODULES`' functions."""
    rng = random.Random(seed)
    code: list[str] = []
    text: list[str] = []
    for module in MODULES:
        for _name, src, doc in functions(module):
            if MIN_LINES <= src.count("\n") + 1 <= MAX_LINES:
                code.append(src)
            if (para := _paragraph(doc)) is not None:
                text.append(para)
    rng.shuffle(code)
    rng.shuffle(text)
    if not code or not text:
        raise ValueError(f"no functions found in the standard library of {sys.executable}")
    out: list[dict[str, Any]] = []
    for i in range(n):
        if i % 2 == 0:
            prompt = f"{CODE_PROMPT}\n\n```python\n{code[(i // 2) % len(code)]}\n```"
            family = "code"
        else:
            prompt = f"{TEXT_PROMPT}\n\n{typo(text[(i // 2) % len(text)], rng)}"
            family = "text"
        out.append({"messages": [{"role": "user", "content": prompt}], "output_tokens": output_tokens, "task": family})
    return out


def write(path: str | Path, n: int = 64, *, seed: int = 0, output_tokens: int = 64) -> Path:
    """Write :func:`items` as a ``jsonl`` workload file (atomically)."""
    lines = [json.dumps(x, ensure_ascii=False) for x in items(n, seed=seed, output_tokens=output_tokens)]
    atomic.write_text(path, "\n".join(lines) + "\n")
    return Path(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m worthit.experiments.specdec.quoting", description=__doc__)
    p.add_argument("out", help="the jsonl file to write")
    p.add_argument("--items", type=int, default=64, help="tasks to write (default 64)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output-tokens", type=int, default=64, help="output tokens each task asks for (default 64)")
    a = p.parse_args(argv)
    path = write(a.out, a.items, seed=a.seed, output_tokens=a.output_tokens)
    print(f"{path}: {a.items} editing tasks (code and text alternating) from Python's standard library")
    return 0


if __name__ == "__main__":
    sys.exit(main())
