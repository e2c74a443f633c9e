"""A real word-level tokenizer made here (so unit tests that build prompts need no model)."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import ROOT

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def word_level_tokenizer() -> Any:
    """A tokenizer over the words of worthit's calibration text, with a chat template."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    text = (ROOT / "src/worthit/data/calibration.jsonl").read_text()
    words = sorted({w for w in re.findall(r"[a-z]+", text.lower())})
    vocab = {w: i for i, w in enumerate(["<unk>", "<|im_start|>", "<|im_end|>", *words])}
    wl = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    wl.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=wl, unk_token="<unk>", eos_token="<|im_end|>")
    fast.add_special_tokens({"additional_special_tokens": ["<|im_start|>"]})
    fast.chat_template = CHAT_TEMPLATE
    return fast
