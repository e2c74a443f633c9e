"""The ``jsonl`` kind: the user's own prompts, one JSON object a line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import Prompter, WorkloadError
from worthit.loadgen.workloads.base import Lengths, LevelRequests, NamedWorkload, _int_field, _jsonl_objects, _rng

_ROLES = ("system", "user", "assistant")


class UserPrompts(NamedWorkload):
    """The user's prompts, one JSON object a line: ``prompt`` (text) or ``messages`` (chat), optional
    ``output_tokens``. A level takes them in file order, from the start again when it needs more."""

    kind = "jsonl"
    realistic = True
    PROMPT_KEYS = ("prompt", "messages")

    def __init__(self, name: str, path: Path, output: Lengths, *, limit: int | None = None) -> None:
        super().__init__(name)
        self.path, self.output = path, output
        self.items: list[tuple[str | list[dict[str, str]], int | None]] = []
        for lineno, obj in _jsonl_objects(path, limit):
            where = f"{path}:{lineno}"
            keys = [k for k in self.PROMPT_KEYS if k in obj]
            if len(keys) != 1:
                raise WorkloadError(
                    f"{where}: expected exactly one of the keys {', '.join(self.PROMPT_KEYS)} (found keys: "
                    f"{', '.join(sorted(obj)) or 'none'})"
                )
            out = _int_field(obj, "output_tokens", where, minimum=1, required=False)
            if keys[0] == "prompt":
                if not isinstance(obj["prompt"], str) or not obj["prompt"]:
                    raise WorkloadError(f"{where}: key 'prompt' must be a non-empty string")
                self.items.append((obj["prompt"], out))
                continue
            msgs = obj["messages"]
            if not isinstance(msgs, list) or not msgs:
                raise WorkloadError(f"{where}: key 'messages' must be a non-empty list of {{role, content}}")
            for i, m in enumerate(msgs):
                if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
                    raise WorkloadError(
                        f"{where}: key 'messages[{i}]' must be {{role, content}} with role one of "
                        f"{', '.join(_ROLES)} and content a string, got {m!r}"
                    )
            self.items.append(([{"role": m["role"], "content": m["content"]} for m in msgs], out))

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        sessions = []
        for i in range(max(num_requests, min_sessions)):
            prompt, out = self.items[i % len(self.items)]
            n_out = out if out is not None else self.output.sample(rng)
            spec = p.from_text(prompt, n_out) if isinstance(prompt, str) else p.from_messages(prompt, n_out)
            sessions.append([spec])
        return LevelRequests(sessions, describe=self.describe())

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "path": str(self.path), "prompts": len(self.items)}

    def files(self) -> list[str]:
        return [str(self.path)]
