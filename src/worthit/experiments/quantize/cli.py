"""``python -m worthit.experiments.quantize run|gate``: the command line the ``quantize_model`` rule runs in the
quantize environment."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from worthit import errors
from worthit.experiments.quantize.gate import quality_gate
from worthit.experiments.quantize.manifest import manifest_status
from worthit.experiments.quantize.run import quantize
from worthit.experiments.quantize.spec import QuantizeError, QuantizePlan


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m worthit.experiments.quantize",
        description="Quantise a model (or judge a checkpoint); write its manifest.",
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("run", help="quantise a base model per a quantize: block of the study config")
    q.add_argument("--name", required=True, help="the quantised model's name (a key of models)")
    q.add_argument("--spec", required=True, help="JSON: the model's quantize: block")
    q.add_argument("--base-manifest", required=True, type=Path)
    q.add_argument("--out", required=True, type=Path, help="folder for model/ and manifest.json")
    g = sub.add_parser("gate", help="held-out NLL/KL of a checkpoint against its base model")
    g.add_argument("--model", required=True, type=Path)
    g.add_argument("--base", type=Path, help="base model folder (NLL increase and KL need it)")
    g.add_argument("--max-nll-increase", type=float, default=1.0)
    g.add_argument("--max-kl", type=float)
    ns = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    if ns.cmd == "gate":
        res = quality_gate(ns.base, ns.model, max_nll_increase=ns.max_nll_increase, max_kl=ns.max_kl)
        print(json.dumps(res.to_dict(), indent=1))
        return 0 if res.passed else 1
    try:
        m = quantize(QuantizePlan.from_config(ns.name, json.loads(ns.spec)), ns.base_manifest, ns.out)
    except QuantizeError as e:
        return errors.report("python -m worthit.experiments.quantize", e)
    status, reason = manifest_status(asdict(m))
    print(f"{m.name}: {status}{': ' + reason if reason else ''}; manifest {ns.out / 'manifest.json'}")
    return 0
