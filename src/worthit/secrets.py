"""Secrets: where the servers' API key comes from, and the one redaction applied wherever worthit writes.

A study never holds a secret. The key of the servers worthit starts comes from an environment variable
(``serve.api_key_env``, ``VLLM_API_KEY`` by default) or a file (``serve.api_key_file``); the supervisor hands
it to vLLM as ``VLLM_API_KEY`` in the server's environment (never on its command line, which ``ps`` and the
logs show), and every client worthit runs sends it as ``Authorization: Bearer``. An ``api-key`` written in
the config is refused when the config is parsed (:func:`refuse_in_config`).

:func:`redact` is applied at each place a file is written (Parquet metadata, ``serve_spec.json``, the server
logs, ``report/config.yaml``, the report page, the printed deployments): the values of keys that name a
secret, of environment variables whose names contain TOKEN, KEY, SECRET or PASSWORD, the argument of
``--api-key``, credentials inside URLs, and any string holding the value of such a variable of this
process's environment become ``***`` (docs/security.md).

This module imports only the standard library: the server supervisor runs it in any stage's environment.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from worthit.errors import InputError

MASK = "***"
DEFAULT_KEY_ENV = "VLLM_API_KEY"
# what vLLM reads (vllm/envs.py) and what OpenAI clients (lm-eval's local-completions, vllm bench serve) read
SERVER_KEY_ENV = "VLLM_API_KEY"
CLIENT_KEY_ENV = "OPENAI_API_KEY"

# Parts of an environment variable's name that mark its value secret (TOKENIZER and TOKENS are not:
# TOKENIZERS_PARALLELISM, VLLM_MAX_TOKENS_PER_...).
_SECRET_NAME_PARTS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")
_NOT_SECRET_PARTS = ("TOKENIZER", "TOKENS")
# Keys of a mapping (engine arguments, headers, metadata) whose string value is a secret, in flag spelling.
SECRET_KEYS = frozenset(
    {"api-key", "apikey", "hf-token", "token", "password", "passwd", "secret", "authorization", "x-api-key"}
)
# Command-line flags whose argument is a secret (vllm serve's own)
SECRET_FLAGS = ("--api-key", "--hf-token")
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<cred>[^/@\s:'\"]+(?::[^/@\s'\"]*)?)@")
_FLAG_ARG = re.compile(
    r"(?P<flag>--(?:api-key|api_key|hf-token|hf_token))(?P<sep>[= ]+)(?P<value>\"[^\"]*\"|'[^']*'|\S+)"
)
_BEARER = re.compile(r"(?P<head>\bBearer\s+)(?P<value>[^\s'\",}]+)", re.IGNORECASE)
# A value shorter than this is not searched for inside text (a variable set to "1" or "true" would mask every one)
MIN_SECRET_LEN = 6


class SecretError(InputError):
    """A secret is where it must not be, or cannot be read; the message says where it goes instead."""


def flag_name(key: object) -> str:
    return str(key).lstrip("-").replace("_", "-").lower()


def secret_name(name: str) -> bool:
    """Whether an environment variable called ``name`` holds a secret (HF_TOKEN, OPENAI_API_KEY, DB_PASSWORD)."""
    n = str(name).upper()
    for harmless in _NOT_SECRET_PARTS:
        n = n.replace(harmless, "")
    return any(part in n for part in _SECRET_NAME_PARTS)


def secret_key(key: object) -> bool:
    """Whether a mapping's key (an engine argument, a header, a metadata field) names a secret value."""
    return flag_name(key) in SECRET_KEYS


def environment_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of this process's environment variables whose names mark them secret, longest first."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if secret_name(k) and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


_extra_secrets: set[str] = set()


def register(value: str | None) -> None:
    """Mask ``value`` wherever :func:`redact` runs in this process (a key read from a file, a header)."""
    if value and len(value) >= MIN_SECRET_LEN:
        _extra_secrets.add(value)


def _known(extra: Iterable[str] = ()) -> list[str]:
    values = set(environment_secrets()) | _extra_secrets | {v for v in extra if v and len(v) >= MIN_SECRET_LEN}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, extra: Iterable[str] = ()) -> str:
    """``text`` with every known secret value, ``--api-key``'s argument, Bearer tokens and URL credentials
    masked."""
    if not text:
        return text
    for value in _known(extra):
        if value in text:
            text = text.replace(value, MASK)
    text = _URL_CREDENTIALS.sub(lambda m: m["scheme"] + MASK + "@", text)
    text = _FLAG_ARG.sub(lambda m: m["flag"] + m["sep"] + (m["value"] if _is_reference(m["value"]) else MASK), text)
    return _BEARER.sub(lambda m: m["head"] + MASK, text)


def _is_reference(value: str) -> bool:
    """A shell reference such as "$VLLM_API_KEY" (what a printed deployment shows) is no secret."""
    return value.strip("\"'").startswith("$") or value.strip("\"'") == MASK


def redact(obj: Any, extra: Iterable[str] = ()) -> Any:
    """A copy of ``obj`` (mappings, lists, strings, other values as they are) with every secret masked:
    values of secret keys (:func:`secret_key`), values under environment mappings (``env``) whose names are
    secret (:func:`secret_name`), the argument following ``--api-key`` in a list, and every string through
    :func:`redact_text`."""
    extra = list(extra)
    return _redact(obj, extra, env=False)


def _redact(obj: Any, extra: list[str], env: bool) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, extra)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            secret = secret_key(k) or (env and secret_name(str(k)))
            if secret and isinstance(v, str) and v and not _is_reference(v):
                out[k] = MASK
            elif secret and isinstance(v, list) and all(isinstance(x, str) for x in v):
                out[k] = [MASK for _ in v]
            else:
                out[k] = _redact(v, extra, env=str(k).lower() in ("env", "environment", "headers"))
        return out
    if isinstance(obj, (list, tuple)):
        items = [_redact(x, extra, env=False) for x in obj]
        for i in range(len(items) - 1):
            nxt = items[i + 1]
            if items[i] in SECRET_FLAGS and isinstance(nxt, str) and not _is_reference(nxt):
                items[i + 1] = MASK
        return tuple(items) if isinstance(obj, tuple) else items
    return obj


# ------------------------------------------------------------------------------------------ the key
def key_source(serve_cfg: Mapping[str, Any] | None) -> dict[str, str | None]:
    """Where the servers' key comes from, as the study's ``serve`` section names it: {"env": ..., "file": ...}."""
    cfg = serve_cfg or {}
    return {"env": str(cfg.get("api_key_env") or DEFAULT_KEY_ENV), "file": cfg.get("api_key_file") or None}


def read_key(source: Mapping[str, Any] | None, environ: Mapping[str, str] | None = None) -> str | None:
    """The key ``source`` names (its file when it names one, else its environment variable), or None when
    that variable is not set. A named file that cannot be read is a :class:`SecretError`."""
    src = dict(source or {})
    env = os.environ if environ is None else environ
    if src.get("file"):
        path = Path(str(src["file"])).expanduser()
        try:
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as e:
            raise SecretError(
                f"the API key file {path} (config key serve.api_key_file) cannot be read: {e}; "
                "write the key alone in it, readable by you only (chmod 600), or set serve.api_key_file: null"
            ) from None
        if not key:
            raise SecretError(f"the API key file {path} (config key serve.api_key_file) is empty")
    else:
        key = env.get(str(src.get("env") or DEFAULT_KEY_ENV), "").strip()
    if key:
        register(key)
    return key or None


def study_key(cfg: Mapping[str, Any]) -> str | None:
    """The key of a study's servers (``serve.api_key_env`` / ``serve.api_key_file``), or None."""
    return read_key(key_source(cfg.get("serve")))


def server_env(env: Mapping[str, str], key: str | None) -> dict[str, str]:
    """A server's environment with its key as vLLM reads it (``VLLM_API_KEY``), or without one."""
    out = dict(env)
    out.pop(SERVER_KEY_ENV, None)
    if key:
        out[SERVER_KEY_ENV] = key
    return out


def auth_headers(key: str | None, headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers every request of a client sends: ``Authorization: Bearer <key>`` and ``headers``."""
    out = {"Authorization": f"Bearer {key}"} if key else {}
    for k, v in (headers or {}).items():
        register(v)
        out[str(k)] = str(v)
    return out


def auth_failure(status: int, url: str, key: str | None, fix: str | None = None) -> str:
    """Why a request was refused (HTTP 401/403) and what to do, for a failure record."""
    how = fix or (
        "set the variable serve.api_key_env names (VLLM_API_KEY by default) or serve.api_key_file to the server's key"
    )
    sent = "the key worthit sent was refused" if key else "worthit sent no key"
    return f"the server requires an API key: {url} answered HTTP {status} ({sent}); {how}"


# ------------------------------------------------------------------------------------------ the config
def refuse_in_config(cfg: Mapping[str, Any], source: str = "config") -> None:
    """Refuse a secret written in the study config: an ``api-key`` (or ``hf-token``) among a variant's or the
    shared engine arguments or extra arguments, or a value for a secret-named environment variable."""
    places: list[tuple[str, Mapping[str, Any], list[str], Mapping[str, Any]]] = []
    serve = cfg.get("serve") or {}
    places.append(("serve", serve.get("engine_args") or {}, [], serve.get("env") or {}))
    for name, v in (cfg.get("variants") or {}).items():
        v = v or {}
        places.append(
            (f"variants.{name}", v.get("engine_args") or {}, list(v.get("extra_args") or []), v.get("env") or {})
        )
    fix = (
        "worthit passes the servers' key itself: put it in the environment variable serve.api_key_env names "
        f"({DEFAULT_KEY_ENV} by default) or in a file named by serve.api_key_file, and remove it from the config "
        "(a key in the config is written to serve_spec.json, every result's metadata and the report)"
    )
    for where, args, extra, env in places:
        for k, v in args.items():
            if flag_name(k) == "api-key" and v not in (None, False):
                raise SecretError(
                    f"{source}: key '{where}.engine_args.{k}': an API key is not an engine argument; {fix}"
                )
            if flag_name(k) == "hf-token" and isinstance(v, str):
                raise SecretError(
                    f"{source}: key '{where}.engine_args.{k}': a Hugging Face token does not belong in the config; "
                    "set HF_TOKEN in the environment you run the study in (the servers inherit it), and remove it"
                )
        for i, a in enumerate(extra):
            if any(a == f or a.startswith(f + "=") for f in SECRET_FLAGS):
                raise SecretError(f"{source}: key '{where}.extra_args[{i}]': {a.split('=')[0]} takes a secret; {fix}")
        for k, v in env.items():
            if _URL_CREDENTIALS.search(str(v)):
                raise SecretError(
                    f"{source}: key '{where}.env.{k}': the URL holds credentials (user:password@); set {k} in the "
                    "environment you run the study in (the servers inherit it) and remove it here"
                )
            if secret_name(k) and str(v).strip():
                hint = (
                    fix
                    if str(k) in (SERVER_KEY_ENV, CLIENT_KEY_ENV)
                    else (
                        f"set {k} in the environment you run the study in (the servers inherit it) and remove it here"
                    )
                )
                raise SecretError(f"{source}: key '{where}.env.{k}': its value is a secret (the name says so); {hint}")


# ------------------------------------------------------------------------------------------ printed commands
# What a printed command shows instead of a secret argument: the variable the user's shell expands.
_FLAG_REFERENCE = {"--api-key": f"${SERVER_KEY_ENV}", "--hf-token": "$HF_TOKEN"}


def printable_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the argument of ``--api-key`` / ``--hf-token`` replaced by the variable that holds it
    (``$VLLM_API_KEY``, ``$HF_TOKEN``), other secrets masked (:func:`redact`)."""
    out = [str(a) for a in argv]
    for i, a in enumerate(out):
        flag, eq, value = a.partition("=")
        if flag in _FLAG_REFERENCE and eq and not _is_reference(value):
            out[i] = f"{flag}={_FLAG_REFERENCE[flag]}"
        elif a in _FLAG_REFERENCE and i + 1 < len(out) and not _is_reference(out[i + 1]):
            out[i + 1] = _FLAG_REFERENCE[a]
    return [redact_text(a) if not a.startswith("$") else a for a in out]


def shell_command(argv: Sequence[str]) -> str:
    """``argv`` as a shell command to copy (:func:`shlex.join`), secrets as ``"$VLLM_API_KEY"`` references the
    shell expands (double-quoted), never their values."""
    parts = []
    for a in printable_argv(argv):
        parts.append(f'"{a}"' if re.fullmatch(r"\$[A-Z_][A-Z0-9_]*", a) else shlex.quote(a))
    return " ".join(parts)


class RedactingFormatter(logging.Formatter):
    """A log formatter that masks every secret (:func:`redact_text`) in what it writes: the stages' logs
    under results/<study>/logs/."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))
