"""The study plan: every variant of a study checked and predicted on one hardware, and what the workflow
leaves out before anything runs."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit import models
from worthit.config import emulated_gib as emulated_gib_of
from worthit.experiments.quantize import NO_WEIGHTS
from worthit.plan import emulate
from worthit.plan.hardware import Hardware, hardware_for
from worthit.plan.memory import CUDA_GRAPH_GIB_PER_LAYER, NON_TORCH_GIB
from worthit.plan.model_sources import model_configs
from worthit.plan.predictions import DEFAULT_BANDWIDTH_FRACTION, PlanCalibration, WorkloadShape, predict
from worthit.plan.prerequisites import NOT_MET, UNKNOWN, PrerequisiteCheck, Subject, check, first_unmet
from worthit.plan.shapes import PlanError, Quant
from worthit.plan.vllm_support import VllmSupport
from worthit.plan.workloads import workload_lines


@dataclass
class StudyPlan:
    """A plan of every variant of a study on one hardware: rows of the ``plan`` table, and what they used."""

    study: str
    hardware: Hardware
    rows: list[dict[str, Any]]
    calibration: PlanCalibration | None = None
    shapes: dict[str, str] = field(default_factory=dict)  # model -> where its config came from
    took_s: float = 0.0
    workloads: list[str] = field(default_factory=list)  # which workload each experiment's levels send, and why

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "hardware": asdict(self.hardware),
            "calibration": asdict(self.calibration) if self.calibration else None,
            "model_configs": self.shapes,
            "constants": {
                "non_torch_gib": NON_TORCH_GIB,
                "cuda_graph_gib_per_layer": CUDA_GRAPH_GIB_PER_LAYER,
            },
            "took_s": self.took_s,
        }


def workload(cfg: Mapping[str, Any], experiments: Sequence[str] = (), variant: str | None = None) -> WorkloadShape:
    """The request shape and levels of the study; with ``variant``, also the levels beyond the grid it
    measures: the closed-loop workload levels that name it (or name none, where it load-tests) and, where
    sweet_spot.variants names it, its probes (sweet_spot.max_probes, one run each, costed at the grid's
    geometric-mean concurrency: where the bracket lies is known only once the grid is measured). Rate and
    replay levels are not costed."""
    from worthit.experiments.loadtest.section import section as loadtest_section
    from worthit.experiments.prefix.section import section as prefix_section
    from worthit.experiments.sweet_spot.section import section as sweet_spot_section

    lt, px = loadtest_section(cfg), prefix_section(cfg)
    levels, repeats = lt.levels, lt.repeats

    def requests(c: int) -> int:
        return lt.num_requests(c) + lt.warmup_requests

    extra: list[tuple[int, int, int]] = []
    if variant is not None:
        # which workload levels a variant measures: one rule (the load test section's variant_levels)
        beyond = [lv.concurrency for lv in lt.variant_levels(variant) if lv.workload is not None]
        extra += [(c, requests(c), repeats) for c in beyond if c is not None]
        sweet = sweet_spot_section(cfg)
        if "loadtest" in experiments and levels and variant in sweet.variants:
            mid = max(1, round(math.exp(sum(math.log(c) for c in levels) / len(levels))))
            extra += [(mid, requests(mid), 1)] * sweet.max_probes
    return WorkloadShape(
        prompt_tokens=lt.prompt_tokens,
        output_tokens=lt.output_tokens,
        levels=levels,
        requests=tuple(requests(c) for c in levels),
        repeats=repeats,
        prefix=tuple((px.prompt_tokens(L), px.num_requests + px.warmup_requests) for L in px.lengths),
        prefix_output_tokens=px.output_tokens,
        experiments=tuple(experiments),
        extra=tuple(extra),
    )


def _planned_quant(spec: Mapping[str, Any]) -> Quant | None:
    q = spec.get("quantize")
    if not q:
        return None
    scheme = str(q.get("scheme", "W4A16_ASYM"))
    if scheme == NO_WEIGHTS:  # weights as the base's (a checkpoint of KV-cache scales only)
        return None
    bits = 4 if scheme.startswith("W4") else 8
    group = q.get("group_size", 64) if scheme.startswith("W4") else None
    return Quant("compressed-tensors", bits, group, zero_point=scheme.endswith("ASYM"))


def make_plan(
    cfg: Mapping[str, Any],
    hw: Hardware,
    root: Path = Path("."),
    *,
    given: Mapping[str, str] | None = None,
    calibration: PlanCalibration | None = None,
    hub: bool = True,
    support: VllmSupport | None = None,
) -> StudyPlan:
    """The plan of a validated study config on ``hw``; ``support``: what the serve env's vLLM says it supports
    (:func:`worthit.plan.vllm_support.ask`), used only where it was built for ``hw``'s kind (CPU or GPU)."""
    t0 = time.monotonic()
    pcfg = cfg.get("plan") or {}
    configs = model_configs(cfg, root, given, hub)
    hw = hw.override(cfg.get("hardware") or {})
    support = support if support is not None and support.cpu == hw.cpu else None
    rows = []
    for vname, v in cfg["variants"].items():
        args = eargs.merged(cfg["serve"]["engine_args"], v.get("engine_args"))
        mspec = cfg["models"][v["model"]]
        shape, checkpoint, folder, _ = configs.get(v["model"], (None, None, None, ""))
        s = Subject(vname, args, shape, checkpoint=checkpoint, gpus_claimed=int(v.get("gpus", 1)), tokenizer=folder)
        s.support = support
        if "quantize" in mspec and (shape is None or shape.quant is None):  # not made yet: judged by its recipe
            s.planned_quant = _planned_quant(mspec)
            s.shape = replace(shape, quant=s.planned_quant) if shape is not None else None
            s.checkpoint = None
        sc = eargs.speculative_config(args)
        d = configs.get(str(sc["model"])) if sc and sc.get("model") else None
        if sc and d is not None and d[0] is not None:
            s.draft, s.draft_name, s.draft_tokenizer = d[0], str(sc["model"]), d[2]
        emulated_gib = emulated_gib_of(cfg, vname)
        emulated: emulate.EmulatedPool | emulate.EmulationError | None = None
        if emulated_gib is not None and s.shape is not None:
            where = f"variant '{vname}' (serve.emulate_gpu_memory_gib or variants.{vname}.emulate_gpu_memory_gib)"
            try:
                weights = emulate.served_weights(s, hw.cpu)
                emulated = emulate.emulated_pool(s.shape, args, weights, emulated_gib, where=where)
            except emulate.EmulationError as e:
                emulated = e
            else:
                s.args = {**args, emulate.FLAG: emulated.kv_bytes}
        try:
            checks = check(s, hw, pcfg.get("memory_overhead_gib"))
            pred = predict(
                s,
                hw,
                workload(cfg, v.get("experiments") or (), vname),
                calibration=calibration,
                bandwidth_fraction=float(pcfg.get("bandwidth_fraction") or DEFAULT_BANDWIDTH_FRACTION),
                overhead_gib=pcfg.get("memory_overhead_gib"),
                server_start_s=pcfg.get("server_start_s"),
            )
        except PlanError as e:
            checks, pred = [PrerequisiteCheck("model", UNKNOWN, str(e))], {"notes": [str(e)]}
        if isinstance(emulated, emulate.EmulationError):
            checks.append(PrerequisiteCheck("memory_fit", NOT_MET, str(emulated), "worthit.plan.emulate"))
        elif emulated is not None:
            pred["notes"] = [emulated.describe(), *pred.get("notes", [])]
        elif emulated_gib is not None:
            pred.setdefault("notes", []).append(
                f"{emulate.KEY} {emulated_gib:g}: the emulated KV pool needs the model's shapes (sized at start)"
            )
        failed = first_unmet(checks)
        row = {
            "variant": vname,
            "model": v["model"],
            "model_config": configs.get(v["model"], (None, None, None, "unknown"))[3],
            "status": "not_applicable" if failed else "ok",
            "reason": failed.reason if failed else None,
            "failed_rule": failed.rule if failed else None,
            "checks": [asdict(c) for c in checks],
            "gpu": hw.name,
            "gpu_count": hw.count,
            "tensor_parallel_size": s.parallel[0],
            "data_parallel_size": s.parallel[2],
            "emulated_gpu_memory_gib": emulated_gib,
            **{k: v for k, v in pred.items() if k != "notes"},
            "notes": "; ".join(pred.get("notes", [])) or None,
        }
        rows.append(row)
    return StudyPlan(
        study=str(cfg["study"]),
        hardware=hw,
        rows=rows,
        calibration=calibration,
        shapes={k: v[3] for k, v in configs.items()},
        took_s=time.monotonic() - t0,
        workloads=workload_lines(cfg),
    )


def fill_in(
    rows: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any], cfg: Mapping[str, Any], root: Path
) -> list[dict[str, Any]]:
    """The plan's rows, those without predictions (model shapes unknown before the fetch) planned again
    now that the models' manifests exist, on the hardware the plan was made for."""
    out = [dict(r) for r in rows]
    if all(r.get("kv_bytes_per_token") is not None for r in out):
        return out
    hw_meta = dict(metadata.get("hardware") or {})
    if hw_meta.get("compute_capability") is not None:
        hw_meta["compute_capability"] = tuple(hw_meta["compute_capability"])
    hw = Hardware(**hw_meta) if hw_meta else hardware_for(cfg)
    again = {r["variant"]: r for r in make_plan(cfg, hw, root, hub=False).rows}
    for i, r in enumerate(out):
        fresh = again.get(r["variant"])
        if r.get("kv_bytes_per_token") is None and fresh and fresh.get("kv_bytes_per_token") is not None:
            note = "planned after the model was fetched (its shapes were unknown before)"
            out[i] = {**fresh, "notes": "; ".join(x for x in (note, fresh.get("notes")) if x)}
    return out


@dataclass(frozen=True)
class RuledOut:
    """What the workflow leaves out before anything runs (workflow/rules/common.smk): the variants the plan
    rules not applicable, each with the reason its server and every measurement of it record, and the
    ``quantize:`` models no other variant would serve, which are never made (quantize.smk)."""

    variants: dict[str, str] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)

    def reason(self, cfg: Mapping[str, Any], variant: str) -> str | None:
        """Why ``variant`` is not served (None: it is): the plan's reason, and that its model was not made."""
        if variant not in self.variants:
            return None
        model = str(cfg["variants"][variant]["model"])
        return self.variants[variant] + (f"; {self.models[model]}" if model in self.models else "")

    def manifest(self, cfg: Mapping[str, Any], model: str) -> dict[str, Any]:
        """The manifest standing in for a model not made: its would-be source and folder, status
        ``not_applicable`` and why (the serve stage refuses any status but ok; the report reads it)."""
        q = cfg["models"][model]["quantize"]
        return asdict(
            models.Manifest(
                name=model,
                source=f"quantize:{q['base']}:{q.get('method', 'awq')}:{q.get('scheme', 'W4A16_ASYM')}",
                revision=None,
                model_dir=f"resources/models/{model}/model",
                extra={"status": "not_applicable", "reason": self.models[model], "quantization": dict(q)},
            )
        )


def refused_before_serving(cfg: Mapping[str, Any], hw: Hardware, vllm_version: str, root: Path = Path(".")) -> RuledOut:
    """What the plan of ``cfg`` on ``hw`` rules out before anything is fetched or served.

    Only a plan for a CPU whose servers run vLLM's CPU build (``vllm_version`` ends in ``+cpu``, as the
    serve environment's does) rules anything out here: this host's CPU is then where every server of the
    study runs. A GPU plan (the config's ``hardware.gpu``, or the submitting host's nvidia-smi) is left to the
    supervisor's gate on the devices each server is given, and a CPU plan beside a GPU build of vLLM is a
    cluster's login node planning for itself. A ``quantize:`` model is not made when every variant serving it
    is ruled out and no other variant's speculative-config names it. Planned without the hub: this runs at
    every parse of the workflow."""
    if not hw.cpu or not vllm_version.endswith("+cpu"):
        return RuledOut()
    rows = make_plan(cfg, hw, root, hub=False).rows
    out = RuledOut({str(r["variant"]): str(r["reason"]) for r in rows if r["status"] == "not_applicable"})
    drafts = " ".join(
        str(sc.get("model") or "")
        for name, v in cfg["variants"].items()
        if name not in out.variants
        and (sc := eargs.speculative_config(eargs.merged(cfg["serve"]["engine_args"], v.get("engine_args"))))
    )
    for name, spec in cfg["models"].items():
        users = [v for v, vs in cfg["variants"].items() if vs["model"] == name]
        if "quantize" in spec and users and all(v in out.variants for v in users) and name not in drafts:
            out.models[name] = (
                f"model '{name}' was not quantised: the plan rules every variant serving it "
                f"({', '.join(users)}) not applicable on this hardware"
            )
    return out
