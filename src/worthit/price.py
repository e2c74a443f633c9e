"""What a token costs in money: a GPU-hour price turned into USD per million output tokens.

``cost: {usd_per_gpu_hour: X}`` in a study config (a variant's own ``cost`` overrides it) prices each
variant's best level under the SLO (the most output tok/s among the levels whose P99 TTFT and P99 TPOT
meet it): ``X x GPUs the server holds / (output tok/s x 3600) x 1e6``. The interval of the output tok/s
gives the price's (the bounds swap: more tokens per second, a lower price). Unset: "not priced".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NOT_PRICED = "not priced (set cost.usd_per_gpu_hour)"


def usd_per_gpu_hour(cfg: Mapping[str, Any], variant: str) -> float | None:
    """The price of one GPU-hour for ``variant``: its own ``cost.usd_per_gpu_hour`` when it sets one, else the
    study's; None when neither does."""
    own = (cfg["variants"][variant].get("cost") or {}).get("usd_per_gpu_hour")
    price = own if own is not None else (cfg.get("cost") or {}).get("usd_per_gpu_hour")
    return None if price is None else float(price)


def usd_per_million_tokens(usd_per_gpu_hour: float | None, gpus: int, output_tok_per_s: float | None) -> float | None:
    """USD per million output tokens of a server holding ``gpus`` GPUs at ``output_tok_per_s`` (None when
    either is unknown, or nothing came out)."""
    if usd_per_gpu_hour is None or not output_tok_per_s or output_tok_per_s <= 0:
        return None
    return usd_per_gpu_hour * max(gpus, 1) / (output_tok_per_s * 3600.0) * 1e6
