"""The report's three steps as the workflow calls them: tables (with verdicts), figures, HTML.

Each step reads the raw results again (cheap: a study is a few hundred kilobytes of Parquet), so the
rules depend only on their inputs. ``python -m worthit.report.build results/<study> --config FILE``
builds all three in one go outside Snakemake.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from worthit import schemas
from worthit.config import config_hash
from worthit.config import load as load_config
from worthit.report import data, html, plots, tables
from worthit.report.analysis import Analysis, analyse
from worthit.report.plots import CAPTIONS

TABLE_FILES = tuple(t.name.removeprefix("report_") for t in schemas.REPORT_TABLES)
PathLike = str | os.PathLike[str]


def analysis(cfg: Mapping[str, Any], results: Iterable[PathLike], summary: PathLike | None = None) -> Analysis:
    return analyse(data.load(results, summary, (cfg.get("variants") or {}).keys()), cfg)


def write_tables(a: Analysis, outdir: PathLike, metadata: Mapping[str, Any]) -> dict[str, Path]:
    return tables.write(a, tables.build(a), outdir, metadata)


def read_tables(table_dir: PathLike) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for t in schemas.REPORT_TABLES:
        p = Path(table_dir) / f"{t.name.removeprefix('report_')}.parquet"
        if p.exists():
            out[t.name] = schemas.read(p, t).table.to_pylist()
    return out


def figures_in(fig_dir: PathLike) -> dict[str, dict[str, Any]]:
    d = Path(fig_dir)
    return {
        name: {"svg": d / f"{name}.svg", "png": d / f"{name}.png", "caption": cap}
        for name, cap in CAPTIONS.items()
        if (d / f"{name}.svg").exists()
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("results", help="results/<study> folder")
    ap.add_argument("--config", required=True, help="the study config the results came from")
    ap.add_argument("--out", help="output folder (default: <results>/report)")
    args = ap.parse_args(argv)
    cfg = load_config(args.config)
    root = Path(args.results)
    out = Path(args.out or root / "report")
    a = analyse(data.load_dir(root, cfg["variants"].keys()), cfg)
    write_tables(a, out, {"config_hash": config_hash(cfg)})
    figs = plots.write(a, out / "figures")
    print(html.write(a, read_tables(out), figs, out / "report.html"))


if __name__ == "__main__":
    main()
