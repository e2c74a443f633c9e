"""Accuracy as a constraint of the tune: a candidate that changes what is served is eligible only once its
non-inferiority against the baseline is acceptable (``tune.accuracy``; docs/architecture.md, "The tune").

What is served is set by the model and the KV cache's dtype (:func:`served_key`); the scheduling flags the
tune searches (max-num-seqs, batched tokens, chunked prefill, a speculative k with greedy sampling) change
how fast the same tokens come, not which. Each served configuration other than the baseline's is measured
once per item budget by the study's own accuracy stage, in a study of its own
(``results/<study>-tune-accuracy-<items>/``: the baseline and one variant per configuration, every task cut
to ``items`` documents), and judged by the accuracy summary's rule (:func:`accuracy_rows`: paired over the
documents both answered, against ``decide.max_accuracy_drop_pt``):

- **acceptable** on every task: eligible;
- **unacceptable** on a task: not eligible (the rounds prune its candidates before their load is measured);
- otherwise **inconclusive**: its candidates are load-tested, and the one that comes near a scenario's
  front is measured again on more items before it may win;
- **failed** (the server refused it, or a task failed): its candidates are recorded as failed.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from worthit import atomic
from worthit import engine_args as eargs
from worthit.config import Study
from worthit.experiments.accuracy.summary import accuracy_rows
from worthit.report.rules import Rules
from worthit.schemas import STATUS_OK
from worthit.tune.prune import candidate_args
from worthit.tune.space import TuneSection
from worthit.tune.studies import own_study

ACCEPTABLE = "acceptable"
UNACCEPTABLE = "unacceptable"
INCONCLUSIVE = "inconclusive"
FAILED = "failed"
BASE = "acc_base"

ServedKey = tuple[str, str]  # (model, kv-cache-dtype)


def served_key(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> ServedKey:
    """What a candidate serves, as far as its answers go: its variant's model and its KV cache's dtype."""
    variant, args = candidate_args(cfg, values)
    return str(cfg["variants"][variant]["model"]), str(eargs.get(args, "kv-cache-dtype") or "auto")


def baseline_key(cfg: Mapping[str, Any]) -> ServedKey:
    return served_key(cfg, {})


def changes_outputs(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> bool:
    return served_key(cfg, values) != baseline_key(cfg)


def key_variant(key: ServedKey) -> str:
    return "acc_" + hashlib.sha256("\0".join(key).encode()).hexdigest()[:10]


def describe_key(key: ServedKey) -> str:
    model, kv = key
    return f"{model}" + ("" if kv == "auto" else f" with kv-cache-dtype {kv}")


@dataclass(frozen=True)
class Judgement:
    decision: str  # acceptable / unacceptable / inconclusive / failed
    items: int
    reason: str


def accuracy_study(cfg: Mapping[str, Any], keys: Sequence[ServedKey], items: int | None) -> dict[str, Any]:
    """The study that measures ``keys``' accuracy against the baseline's on ``items`` documents per task
    (None: each task's own limit), validated with its defaults filled."""
    base_variant = str(cfg["baseline_variant"])
    variants: dict[str, Any] = {}
    for name, key in [(BASE, baseline_key(cfg)), *((key_variant(k), k) for k in keys)]:
        model, kv = key
        owners = [base_variant, *cfg["variants"]]  # the baseline's own variant where it serves that model
        owner = next(n for n in owners if str(cfg["variants"][n]["model"]) == model)
        v = copy.deepcopy(dict(cfg["variants"][owner]))  # the model's own variant: its dtype, its flags
        args = eargs.without(v.get("engine_args") or {}, "kv-cache-dtype")
        v["engine_args"] = {**args, **({} if kv == "auto" else {"kv-cache-dtype": kv})}
        v["experiments"] = ["accuracy"]
        v.pop("baseline", None)
        v["description"] = f"tune accuracy: {describe_key(key)}"
        variants[name] = v
    tasks = [dict(t) for t in (cfg.get("accuracy") or {}).get("tasks") or []]
    if items is not None:
        for t in tasks:
            t["limit"] = min(int(t["limit"]), items) if t.get("limit") else items
    acc = {**cfg, "accuracy": {**cfg["accuracy"], "tasks": tasks}} if tasks else cfg
    name = f"{cfg['study']}-tune-accuracy-{items or 'all'}"
    return own_study(acc, study=name, variants=variants, baseline=BASE, source="tune accuracy")


def judge(rows: Sequence[Mapping[str, Any]], variant: str, items: int) -> Judgement:
    """A served configuration's tasks -> one judgement (every task acceptable, one unacceptable, ...)."""
    mine = [r for r in rows if r.get("variant") == variant]
    bad = [r for r in mine if r.get("status") != STATUS_OK or r.get("decision") is None]
    if not mine or bad:
        why = "; ".join(
            f"{r.get('task') or 'accuracy'}: {r.get('status')} {r.get('reason') or ''}".strip() for r in bad
        )
        return Judgement(FAILED, items, why or "no accuracy measured")

    def line(r: Mapping[str, Any]) -> str:
        lo, hi = r.get("delta_ci95_low_pt"), r.get("delta_ci95_high_pt")
        ci = f" [{lo:+.1f}, {hi:+.1f}]" if lo is not None and hi is not None else ""
        metric = f" {r['metric']}" if r.get("metric") else ""
        return f"{r['task']}{metric} {r['delta_pt']:+.1f} pt{ci} vs -{r['max_drop_pt']:g}"

    for decision in (UNACCEPTABLE, INCONCLUSIVE):
        hit = [r for r in mine if r["decision"] == decision]
        if hit:
            return Judgement(decision, items, f"accuracy {decision} on {items} items: " + "; ".join(map(line, hit)))
    return Judgement(ACCEPTABLE, items, f"accuracy acceptable on {items} items: " + "; ".join(map(line, mine)))


Runner = Callable[[Path, Sequence[str]], int]  # (config file, targets) -> the workflow's exit status


def measure(
    cfg: Mapping[str, Any], keys: Sequence[ServedKey], items: int | None, *, workdir: Path, run: Runner
) -> dict[ServedKey, Judgement]:
    """Measure ``keys`` (and the baseline) on ``items`` per task through the workflow, then judge each; what
    an earlier run measured is not measured again (Snakemake's outputs)."""
    if not keys:
        return {}
    acc = accuracy_study(cfg, keys, items)
    study = Study(acc)
    results = workdir / "results" / study.name
    cfg_file = results / "study.yaml"
    cfg_file.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(cfg_file, yaml.safe_dump(acc, sort_keys=False))
    files = {v: results / f"variant~{v}" for v in acc["variants"]}
    targets = [str((files[v] / f"{f}.parquet").relative_to(workdir)) for v in files for f in study.result_files(v)]
    run(cfg_file, targets)
    main = {v: str(files[v] / "accuracy.parquet") for v in files if (files[v] / "accuracy.parquet").exists()}
    samples = {v: str(p) for v in files if (p := files[v] / "accuracy_samples.parquet").exists()}
    rows = accuracy_rows(main, BASE, samples, Rules.from_config(acc).max_drop) if BASE in main else []
    n = items or max((int(t.get("limit") or 0) for t in acc["accuracy"]["tasks"]), default=0)
    out = {}
    for k in keys:
        out[k] = judge(rows, key_variant(k), n) if rows else Judgement(FAILED, n, "the baseline's accuracy failed")
    return out


class AccuracyGate:
    """The judgements so far, per served configuration: the screen's, then the near-front measurement's."""

    def __init__(self, cfg: Mapping[str, Any], section: TuneSection, *, workdir: Path, run: Runner) -> None:
        self.cfg, self.section, self.workdir, self.run = cfg, section, workdir, run
        self.screened: dict[ServedKey, Judgement] = {}
        self.settled: dict[ServedKey, Judgement] = {}

    def screen(self, candidates: Sequence[Mapping[str, Any]]) -> None:
        """Screen every served configuration among ``candidates`` not screened yet (one workflow run)."""
        new = sorted({served_key(self.cfg, c) for c in candidates if changes_outputs(self.cfg, c)} - set(self.screened))
        self.screened.update(
            measure(self.cfg, new, self.section.accuracy_screen_items, workdir=self.workdir, run=self.run)
        )

    def verdict(self, values: Mapping[str, Any]) -> Judgement | None:
        """The latest judgement of a candidate's served configuration (None: it serves the baseline's)."""
        if not changes_outputs(self.cfg, values):
            return None
        key = served_key(self.cfg, values)
        return self.settled.get(key) or self.screened.get(key)

    def settle(self, candidates: Sequence[Mapping[str, Any]]) -> None:
        """Measure on near_front_items the inconclusive configurations among ``candidates`` (near the front)."""
        todo = sorted(
            {
                served_key(self.cfg, c)
                for c in candidates
                if (j := self.verdict(c)) is not None and j.decision == INCONCLUSIVE
            }
            - set(self.settled)
        )
        self.settled.update(
            measure(self.cfg, todo, self.section.accuracy_near_front_items, workdir=self.workdir, run=self.run)
        )
