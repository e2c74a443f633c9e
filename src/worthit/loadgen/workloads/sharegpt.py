"""The ``sharegpt`` kind: real conversations sampled as ``vllm bench serve --dataset-name sharegpt`` does."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import Prompter, WorkloadError
from worthit.loadgen.records import RequestSpec
from worthit.loadgen.workloads.base import Lengths, LevelRequests, NamedWorkload, _rng
from worthit.loadgen.workloads.corpus import (
    SHAREGPT_FILTERS,
    SHAREGPT_PACKAGE,
    ShareGPTCorpus,
    read_sharegpt,
    sharegpt_package_path,
)


class ShareGPT(NamedWorkload):
    """Real conversations in ShareGPT format, sampled as ``vllm bench serve --dataset-name sharegpt`` does.

    ``turns: 1`` (the default): each request is a conversation's first turn, its length from the reply's
    tokens (or ``output_tokens``), conversations drawn in a seeded shuffle and kept when they pass vLLM's
    filters (``min_tokens``, ``max_prompt_tokens``, ``max_total_tokens``, and the server's max-model-len
    where known). ``turns: N`` or ``all``: multi-turn replay: turn k resends the corpus's own earlier turns
    (its user messages and the replies recorded in it) plus its next user message, as many turns as the
    conversation has (at most N); a conversation ends at its first turn the filters refuse.
    """

    kind = "sharegpt"
    realistic = True

    def __init__(
        self,
        name: str,
        path: Path | None,
        *,
        turns: int | None = 1,
        output: Lengths | None = None,
        min_tokens: int = SHAREGPT_FILTERS["min_tokens"],
        max_prompt_tokens: int = SHAREGPT_FILTERS["max_prompt_tokens"],
        max_total_tokens: int = SHAREGPT_FILTERS["max_total_tokens"],
        max_model_len: int | None = None,
    ) -> None:
        super().__init__(name)
        self.path, self.turns, self.output = path, turns, output
        self.min_tokens, self.max_prompt_tokens, self.max_total_tokens = min_tokens, max_prompt_tokens, max_total_tokens
        self.max_model_len = max_model_len

    @property
    def corpus(self) -> ShareGPTCorpus:
        """The file's complete records (read once per process; first-turn levels keep two turns of each)."""
        keep = None if self.turns is None else 2 * self.turns
        return read_sharegpt(self.path or sharegpt_package_path(), keep)

    def _fits(self, n_prompt: int, n_out: int) -> bool:
        """vLLM's is_valid_sequence (the output's minimum only where the output length comes from the corpus)."""
        return (
            n_prompt >= self.min_tokens
            and (self.output is not None or n_out >= self.min_tokens)
            and n_prompt <= self.max_prompt_tokens
            and n_prompt + n_out <= self.max_total_tokens
        )

    def _served(self, spec: RequestSpec) -> bool:
        """The request fits the server's context where known (its prompt as sent: a chat template's tokens too)."""
        return self.max_model_len is None or spec.prompt_tokens + spec.max_tokens <= self.max_model_len

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        corpus = self.corpus
        order = list(range(len(corpus.conversations)))
        rng.shuffle(order)  # seeded: a level's prompts are the same on every variant, and its own

        def n_tokens(text: str) -> int:  # as vLLM's filter counts them: the tokenizer's ids for the text
            return len(tok.encode(text))

        sessions: list[list[RequestSpec]] = []
        total, skipped, used = 0, 0, 0
        need = max(num_requests, 1)
        for i in order:
            if total >= need and len(sessions) >= min_sessions:
                break
            session = self._session(corpus.conversations[i], p, rng, n_tokens)
            used += 1
            if not session:
                skipped += 1
                continue
            sessions.append(session)
            total += len(session)
        if not sessions:
            raise WorkloadError(
                f"workloads.{self.name}: none of the {len(corpus.conversations)} conversations of {corpus.path} passes "
                f"the filters (min_tokens {self.min_tokens}, max_prompt_tokens {self.max_prompt_tokens}, "
                f"max_total_tokens {self.max_total_tokens}, max-model-len {self.max_model_len})"
            )
        k = len(sessions)
        while (total < need or len(sessions) < min_sessions) and k:  # a small corpus: its sessions again, in order
            sessions.append(sessions[len(sessions) % k])
            total += len(sessions[-1])
        describe = {
            **self.describe(),
            "conversations_drawn": used,
            "conversations_filtered_out": skipped,
            "conversations_sent": len(sessions),
        }
        return LevelRequests(sessions, describe=describe)

    def _session(
        self, conv: tuple[tuple[str, str], ...], p: Prompter, rng: random.Random, n_tokens: Any
    ) -> list[RequestSpec]:
        """One conversation's requests (empty when its first turn does not pass the filters)."""
        if self.turns == 1:  # vLLM's sharegpt: the first two turns, the prompt and the reply
            if len(conv) < 2:
                return []
            prompt, reply = conv[0][1], conv[1][1]
            n_prompt = n_tokens(prompt)
            n_out = self.output.sample(rng) if self.output is not None else n_tokens(reply)
            if not self._fits(n_prompt, n_out):
                return []
            spec = p.from_text(prompt, n_out)
            return [spec] if self._served(spec) else []
        out: list[RequestSpec] = []
        history: list[dict[str, str]] = []
        n_history = 0
        start = next((j for j, (role, _) in enumerate(conv) if role == "user"), len(conv))
        for j in range(start, len(conv) - 1, 2):
            (role_u, user), (role_a, reply) = conv[j], conv[j + 1]
            if role_u != "user" or role_a != "assistant" or (self.turns is not None and len(out) >= self.turns):
                break  # the turns stop alternating (or enough of them): the conversation ends here
            n_user = n_tokens(user)
            n_out = self.output.sample(rng) if self.output is not None else n_tokens(reply)
            if not self._fits(n_history + n_user, n_out):
                break
            messages = [*history, {"role": "user", "content": user}]
            spec = p.from_messages(messages, n_out)
            if not self._served(spec):
                break
            out.append(spec)
            history = [*messages, {"role": "assistant", "content": reply}]
            n_history += n_user + n_tokens(reply)
        return out

    def describe(self) -> dict[str, Any]:
        corpus = self.corpus
        return {
            **super().describe(),
            "source": str(self.path) if self.path else f"{SHAREGPT_PACKAGE} (ShareGPT V3): {corpus.path}",
            "records_read": corpus.records,
            "torn_tail": corpus.torn_tail,
            "turns": "all" if self.turns is None else self.turns,
            "output_tokens": "from each reply" if self.output is None else self.output.describe(),
            "min_tokens": self.min_tokens,
            "max_prompt_tokens": self.max_prompt_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_model_len": self.max_model_len,
        }

    def files(self) -> list[str]:
        return [str(self.path)] if self.path else []
