"""``worthit plan``: the command line (worthit.cli parses the arguments)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worthit import errors
from worthit.config import ROOT, Study, load
from worthit.errors import InputError
from worthit.plan.hardware import hardware_for
from worthit.plan.measured import calibrate
from worthit.plan.output import markdown, print_cards, write
from worthit.plan.shapes import PlanError
from worthit.plan.study import make_plan
from worthit.plan.vllm_support import ask


def parse_model_configs(items: Sequence[str] | None) -> dict[str, str]:
    """``--model-config NAME=FILE`` arguments as {name: file}."""
    out = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise PlanError(f"--model-config {item!r}: expected NAME=FILE (a model of the study, or a draft's hub id)")
        out[name] = path
    return out


def run_cli(a: Any) -> int:
    """``worthit plan``: plan a study config, write plan.parquet (and plan.md beside it), print the cards."""
    try:
        cfg = load(a.configfile or ROOT / "config" / "config.yaml")
        hw = hardware_for(cfg, a.gpu, a.gpus)
        cal = calibrate(a.calibration) if a.calibration else None
        hub = bool(cfg["plan"]["hub_configs"]) and not a.no_hub
        # the serve env's vLLM says what it supports (FP8 weights, KV offloading, suffix decoding's package)
        support = None if getattr(a, "no_vllm", False) else ask(Study(cfg).python("serve"))
        given = parse_model_configs(a.model_config)
        plan = make_plan(cfg, hw, Path.cwd(), given=given, calibration=cal, hub=hub, support=support)
    except InputError as e:  # a bad config, model config or calibration result
        return errors.report("worthit plan", e)
    out = Path(a.out or f"results/{plan.study}/plan.parquet")
    write(plan, out)
    from worthit import atomic

    atomic.write_text(out.with_suffix(".md"), markdown(plan))
    print_cards(plan)
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0
