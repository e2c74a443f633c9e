"""``python -m worthit.server``: the serve rule's command. Reads the spec, then supervises the variant's server,
or refuses to start one and says why."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from worthit.experiments.quantize import manifest_status
from worthit.plan import emulate
from worthit.server.supervisor import refuse, supervise


def main(argv: Sequence[str] | None = None) -> int:
    """Supervise the variant the spec names (:func:`~worthit.server.supervisor.supervise`), or refuse to serve
    it (a model whose manifest says it must not be served, a spec that says why nothing is): exit status 0."""
    p = argparse.ArgumentParser(
        prog="python -m worthit.server", description="Supervise one variant's vLLM server (the serve rule)."
    )
    p.add_argument("--state", required=True, type=Path, help="state file to write (service output)")
    p.add_argument("--log", required=True, type=Path, help="server log")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--spec",
        help="JSON: variant, model_dir or manifest, python, args, extra, env, gpus; or argv (a printed "
        "'vllm serve ...' command to serve as printed); refuse: {status, reason} starts nothing",
    )
    src.add_argument("--spec-file", type=Path, help="a file holding that JSON")
    ns = p.parse_args(argv)
    spec = json.loads(ns.spec if ns.spec else ns.spec_file.read_text())
    manifest = json.loads(Path(spec["manifest"]).read_text()) if spec.get("manifest") else {}
    model_dir = spec["model_dir"] if "model_dir" in spec else manifest["model_dir"]
    status, reason = manifest_status(manifest)

    def refused(why: str, outcome: str) -> int:
        """Record why nothing is served and wait for the stop the service expects (no server runs)."""
        stop: list[int] = []
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: stop.append(1))
        return refuse(
            ns.state,
            ns.log,
            variant=spec["variant"],
            model_dir=model_dir,
            cmd=[],
            port=0,
            reason=why,
            locks=[],
            stopping=lambda: bool(stop),
            parent=os.getppid(),
            status=outcome,
        )

    if spec.get("refuse"):  # nothing to serve (e.g. no deployment was recommended): say why, start nothing
        return refused(spec["refuse"].get("reason", ""), spec["refuse"].get("status", "not_run"))
    if status != "ok":  # e.g. a quantised model that failed its quality gate: never serve it
        return refused(
            f"model '{manifest.get('name')}' of variant '{spec['variant']}' is not served "
            f"(model status {status}): {reason or 'no reason recorded'}",
            "failed",
        )
    args = spec.get("args")
    if spec.get("emulate_gpu_memory_gib"):  # the KV pool of a smaller card, from the model's own files
        v = spec["variant"]
        where = f"variant '{v}' (serve.emulate_gpu_memory_gib or variants.{v}.emulate_gpu_memory_gib)"
        try:
            args, pool = emulate.serve_args(args, model_dir, float(spec["emulate_gpu_memory_gib"]), where=where)
        except emulate.EmulationError as e:
            return refused(str(e), "failed")
        ns.log.parent.mkdir(parents=True, exist_ok=True)
        with open(ns.log, "a") as log:
            log.write(f"[worthit] {pool.describe()}\n[worthit] emulated: {json.dumps(pool.as_record())}\n")
    return supervise(
        ns.state,
        ns.log,
        variant=spec["variant"],
        model_dir=model_dir,
        python=spec["python"],
        args=args,
        extra=spec.get("extra", []),
        env=spec.get("env", {}),
        gpus=int(spec.get("gpus", 0)),
        argv=spec.get("argv"),
        api_key=spec.get("api_key"),
    )


if __name__ == "__main__":
    sys.exit(main())
