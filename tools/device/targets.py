"""Snakemake targets for part of a study, so one device call can finish a chosen set of variants.

  python tools/device/targets.py CONFIG [VARIANT ...]   # the measurement files of these variants (all if none)
  python tools/device/targets.py CONFIG --quantized [VARIANT ...]  # manifests of the quantised models they serve
  python tools/device/targets.py CONFIG --missing [VARIANT ...]    # only those not on disk yet
  ... --quantized --reset-stale [VARIANT ...]   # first remove the manifest of a quantised model whose folder is
                                                # gone (results carried to a fresh machine) when a variant
                                                # serving it still has measurements to make: it is made again

The files are read off Snakemake's own plan (``snakemake --summary``): everything the workflow writes
under ``results/<study>/variant~<name>/`` except the server's state and spec, i.e. kv, every load run,
prefix lengths, accuracy and verify timing, however the workflow names them. Aggregates and the report
are not targets here: the last call runs the whole workflow (no targets), which builds them.
Run it with the interpreter that has Snakemake (the workflow env, or the device's /tmp/site).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from worthit.config import Study, load  # noqa: E402

NOT_MEASUREMENTS = ("server.json", "serve_spec.json")


def planned_files(config: Path) -> list[str]:
    """Every output file of the study's workflow, as ``snakemake --summary`` lists them (first column)."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--summary", "--configfile", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(f"snakemake --summary --configfile {config} failed:\n{proc.stderr[-3000:]}")
    lines = [ln.split("\t")[0] for ln in proc.stdout.splitlines() if "\t" in ln]
    return [f for f in lines[1:] if f]  # the first line is the header


def variant_targets(files: list[str], study: Study, variant: str) -> list[str]:
    folder = f"results/{study.name}/variant~{variant}/"
    return sorted(
        f
        for f in files
        if f.startswith(folder) and Path(f).name not in NOT_MEASUREMENTS and "/accuracy/" not in f[len(folder) - 1 :]
    )


def quantized_models(study: Study, variants: list[str]) -> list[str]:
    models = study.cfg["models"]
    return [m for m in dict.fromkeys(study.variant(v).model for v in variants) if "quantize" in models[m]]


def reset_stale(config: Path, study: Study, variants: list[str]) -> None:
    files = None
    for m in quantized_models(study, variants):
        manifest = ROOT / f"resources/models/{m}/manifest.json"
        if not manifest.exists() or Path(json.loads(manifest.read_text())["model_dir"]).is_dir():
            continue
        files = files if files is not None else planned_files(config)
        users = [v for v in variants if study.variant(v).model == m]
        if any(not (ROOT / t).exists() for v in users for t in variant_targets(files, study, v)):
            manifest.unlink()
            print(
                f"{manifest.relative_to(ROOT)}: its model folder is gone and {', '.join(users)} need it: made again",
                file=sys.stderr,
            )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("config", type=Path)
    p.add_argument("variants", nargs="*")
    p.add_argument("--quantized", action="store_true", help="the quantised models' manifests")
    p.add_argument("--missing", action="store_true", help="only targets that do not exist yet")
    p.add_argument("--reset-stale", action="store_true", help="with --quantized: see above")
    ns = p.parse_intermixed_args(argv)  # variants may follow the flags
    study = Study(load(ns.config), ROOT)
    unknown = [v for v in ns.variants if v not in study.variants]
    if unknown:
        print(f"{ns.config}: unknown variant(s) {unknown} (allowed: {', '.join(study.variants)})", file=sys.stderr)
        return 2
    if ns.quantized:
        if ns.reset_stale:
            reset_stale(ns.config, study, ns.variants or study.variants)
        targets = [
            f"resources/models/{m}/manifest.json" for m in quantized_models(study, ns.variants or study.variants)
        ]
    else:
        files = planned_files(ns.config)
        targets = [t for v in ns.variants or study.variants for t in variant_targets(files, study, v)]
    if ns.missing:
        targets = [t for t in targets if not (ROOT / t).exists()]
    print(" ".join(targets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
