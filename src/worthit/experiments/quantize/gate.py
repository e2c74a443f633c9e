"""The quality gate every quantised model passes before anything serves it: NLL of the held-out text under
the quantised checkpoint as written to disk, vs the base model, plus the mean KL between their next-token
distributions (:func:`quality_gate`)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from worthit.experiments.quantize.spec import QuantizeError
from worthit.experiments.quantize.text import HELDOUT_FILE, read_texts


@dataclass
class GateResult:
    nll_base: float | None
    nll_quantized: float | None
    nll_increase: float | None
    kl: float | None
    tokens: int
    max_nll_increase: float
    max_kl: float | None
    passed: bool
    reason: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def gate_device() -> str:
    """Where the gate's forward passes run: the accelerator when there is one (a 7B's two fp32 passes take
    minutes on a CPU and seconds on a GPU; docs/hardware-results.md), else the CPU."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _load_for_gate(model_dir: Path, device: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    # fp32 either way: the gate compares two models' NLL to a few thousandths of a nat
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.to(device)  # type: ignore[arg-type]  # transformers' stubs type .to() by its dtype overload
    model.eval()
    return model


def nll_and_kl(
    base_dir: Path | None, quant_dir: Path, texts: Sequence[str], max_tokens: int = 512
) -> tuple[float | None, float, float | None, int]:
    """Mean NLL per token of ``texts`` under the base and the quantised model, and the mean
    KL(base || quantised) of the next-token distributions (nats)."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(quant_dir))
    device = gate_device()
    quant = _load_for_gate(quant_dir, device)
    base = _load_for_gate(base_dir, device) if base_dir is not None else None
    nll_b = nll_q = kl = 0.0
    n = 0
    with torch.inference_mode():
        for text in texts:
            ids = tok(text, return_tensors="pt")["input_ids"][:, :max_tokens].to(device)
            if ids.shape[1] < 2:
                continue
            target = ids[:, 1:]
            lq = torch.log_softmax(quant(ids).logits[:, :-1].float(), dim=-1)
            nll_q += float(-lq.gather(-1, target[..., None]).sum())
            if base is not None:
                lb = torch.log_softmax(base(ids).logits[:, :-1].float(), dim=-1)
                nll_b += float(-lb.gather(-1, target[..., None]).sum())
                kl += float((lb.exp() * (lb - lq)).sum())
                del lb
            del lq
            n += target.numel()
    if n == 0:
        raise QuantizeError("held-out text is empty")
    return (nll_b / n if base is not None else None), nll_q / n, (kl / n if base is not None else None), n


def quality_gate(
    base_dir: Path | None,
    quant_dir: Path,
    *,
    max_nll_increase: float,
    max_kl: float | None = None,
    texts: Sequence[str] | None = None,
) -> GateResult:
    """Judge a quantised checkpoint as written to disk against its base model."""
    t0 = time.monotonic()
    texts = list(texts) if texts is not None else read_texts(HELDOUT_FILE)
    nll_b, nll_q, kl, n = nll_and_kl(base_dir, quant_dir, texts)
    inc = None if nll_b is None else nll_q - nll_b
    reasons = []
    if not math.isfinite(nll_q):
        reasons.append(f"held-out NLL of the quantised model is {nll_q}")
    if inc is not None and inc > max_nll_increase:
        reasons.append(
            f"held-out NLL rose by {inc:.3f} nats/token ({nll_b:.3f} -> {nll_q:.3f}), "
            f"above the bound max_nll_increase={max_nll_increase}"
        )
    if kl is not None and max_kl is not None and kl > max_kl:
        reasons.append(f"KL(base || quantised) {kl:.3f} nats/token above the bound max_kl={max_kl}")
    return GateResult(
        nll_base=nll_b,
        nll_quantized=nll_q,
        nll_increase=inc,
        kl=kl,
        tokens=n,
        max_nll_increase=max_nll_increase,
        max_kl=max_kl,
        passed=not reasons,
        reason="; ".join(reasons),
        wall_s=time.monotonic() - t0,
    )
