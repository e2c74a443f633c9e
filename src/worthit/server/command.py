"""A variant's ``vllm serve`` command line: its engine arguments as flags, or a printed command served as printed."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worthit import engine_args


def engine_flags(args: Mapping[str, Any] | None, extra: Sequence[str] = ()) -> list[str]:
    """Engine arguments -> ``vllm serve`` flags, verbatim.

    ``{"max-model-len": 2048}`` -> ``--max-model-len 2048``; ``True`` -> the bare flag; ``False`` -> the
    flag's negative form, as vLLM's boolean flags take it (``enable-chunked-prefill: false`` ->
    ``--no-enable-chunked-prefill``; vLLM's default for it is on, so leaving the flag out would keep it on),
    except for a flag that is itself a negation (``no-...``, ``disable-...``: false is its default, left out);
    ``None`` -> left out (a variant drops serve's flag); a mapping -> JSON (e.g. ``--speculative-config``);
    a list -> one argument per item, as vLLM's list flags take them (``--cudagraph-capture-sizes 1 2 4``,
    ``--lora-modules`` with a JSON object per item): a flag that wants one JSON list (the CORS flags) is
    given it as a string. ``extra`` is appended as given.
    """
    flags: list[str] = []
    for key, value in (args or {}).items():
        flag = "--" + engine_args.flag(key)
        if value is None:
            continue
        if value is True:
            flags.append(flag)
        elif value is False:
            if (off := engine_args.negative_form(key)) is not None:
                flags.append(f"--{off}")
        elif isinstance(value, (list, tuple)):
            flags += [flag, *(_arg(v) for v in value)]
        else:
            flags += [flag, _arg(value)]
    return flags + list(extra)


def _arg(value: Any) -> str:
    """One command-line argument: a mapping or list as compact JSON, a bool as vLLM's argparse reads it."""
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, separators=(",", ":"))
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def serve_command(
    python: str,
    model_dir: str,
    *,
    served_name: str,
    port: int,
    args: Mapping[str, Any] | None,
    extra: Sequence[str] = (),
) -> list[str]:
    """``python -m vllm.entrypoints.openai.api_server`` serving ``model_dir`` as ``served_name`` on the loopback
    ``port``, with the engine arguments ``args`` as flags (:func:`engine_flags`) and ``extra`` after them."""
    return [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        model_dir,
        "--served-model-name",
        served_name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *engine_flags(args, extra),
    ]


def argv_command(python: str, argv: Sequence[str], port: int) -> tuple[list[str], str]:
    """A printed ``vllm serve MODEL --flag ...`` command, run as printed by the given environment's vLLM.

    ``vllm`` becomes that environment's console script (the same ``vllm`` a user would type after activating
    it); only the address is added (``--host 127.0.0.1 --port P``), which a printed command leaves to vLLM's
    defaults. Returns the command and the model name the server answers to (``--served-model-name``, else
    the model argument, as vLLM itself defaults it)."""
    argv = _without_key_flags(argv)
    if len(argv) < 3 or argv[0] != "vllm" or argv[1] != "serve":
        raise ValueError(f"not a 'vllm serve MODEL ...' command: {argv[:3]}")
    script = Path(python).parent / "vllm"
    head = [str(script)] if script.exists() else [python, "-m", "vllm.entrypoints.cli.main"]
    served = argv[2]
    for i, a in enumerate(argv):
        if a == "--served-model-name" and i + 1 < len(argv):
            served = argv[i + 1]
        elif a.startswith("--served-model-name="):
            served = a.split("=", 1)[1]
    return [*head, *argv[1:], "--host", "127.0.0.1", "--port", str(port)], served


def _without_key_flags(argv: Sequence[str]) -> list[str]:
    """``argv`` less ``--api-key`` and its argument (a printed command shows ``--api-key "$VLLM_API_KEY"``):
    the supervisor gives vLLM the key in its environment instead (:func:`worthit.secrets.server_env`)."""
    out: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--api-key":
            skip = True
        elif not a.startswith("--api-key="):
            out.append(a)
    return out
