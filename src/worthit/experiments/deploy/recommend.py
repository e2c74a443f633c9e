"""Recommended deployments, each by its own objective, and what their validation runs measured.

- **latency-first**: among the baseline and the variants adopted for latency-first serving (at the levels
  where they are adopted), the highest measured concurrency whose P99 TTFT and P99 TPOT meet the
  interactive SLO, the lowest TPOT P50 breaking ties;
- **throughput-first**: among the baseline and the variants adopted for throughput-first serving, the level
  with the most output tok/s whose P99 TPOT stays under ``decide.throughput_tpot_ms``.

``--max-num-seqs`` is that concurrency (a level of the measured grid, so the promise is a measured one); the
other flags are the variant's as configured, and ``chosen_by`` says which measurement chose each. The model
is named as the config names it: the hub id (with its revision), the configured path, or the folder the
workflow built (``resources/models/<name>/model``). The validate_deployment stage (:mod:`.validate`) serves
``argv`` exactly and loads it at the promised concurrency; :func:`validation_rows` sets what it
measured against the promise, a miss being a measured value beyond the promised interval on the worse side.
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worthit import engine_args as eargs
from worthit import schemas, secrets
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS, REPORT_VALIDATION
from worthit.experiments.loadtest.report import Level, LoadAnalysis, ceiling_text, level
from worthit.experiments.sweet_spot.report import SweetSpot
from worthit.report.context import Context, Pair
from worthit.report.decide import ADOPT, LATENCY, THROUGHPUT, Verdict
from worthit.report.views import INT, MEASURE, OUTCOME, TEXT, VARIANT, Column, View, measure_cols
from worthit.server import engine_flags

if TYPE_CHECKING:
    from worthit.experiments.kv.report import Capacity

FIGURES = (  # (key, label, unit, higher is better)
    ("ttft_ms_p50", "TTFT P50", "ms", False),
    ("ttft_ms_p99", "TTFT P99", "ms", False),
    ("tpot_ms_p50", "TPOT P50", "ms", False),
    ("tpot_ms_p99", "TPOT P99", "ms", False),
    ("output_tok_per_s", "output tok/s", "tok/s", True),
    ("goodput_tok_per_s", "goodput tok/s", "tok/s", True),
)
_LEVEL_ATTR = {
    "ttft_ms_p50": "ttft_p50",
    "ttft_ms_p99": "ttft_p99",
    "tpot_ms_p50": "tpot_p50",
    "tpot_ms_p99": "tpot_p99",
    "output_tok_per_s": "output_tok_per_s",
    "goodput_tok_per_s": "goodput_tok_per_s",
}


def model_argv(source: str, model: str) -> tuple[str, list[str]]:
    """What ``vllm serve`` loads for the model ``model`` whose ``source`` the config names, and the flags that
    pin it (``--revision``)."""
    kind, _, rest = source.partition(":")
    if kind in ("hf", "modelscope"):
        repo, _, rev = rest.partition("@")
        return repo, (["--revision", rev] if rev else [])
    if kind == "path":
        return rest, []
    return f"resources/models/{model}/model", []  # built by the workflow (GGUF, quantised)


def model_ref(ctx: Context, variant: str) -> tuple[str, list[str]]:
    """What ``vllm serve`` loads, as the config names it, and the flags that pin it (``--revision``)."""
    return model_argv(ctx.model_source(variant), ctx.model(variant))


def local_model_note(ctx: Context, variant: str) -> str:
    """A warning where the config names its model by a machine-local temporary folder (a copy staged for one
    run, e.g. on a device without a hub): the printed command will not find it anywhere else."""
    kind, _, rest = ctx.model_source(variant).partition(":")
    if kind != "path":
        return ""
    tmp = Path(tempfile.gettempdir()).resolve()
    folder = Path(rest).expanduser()
    if folder.is_absolute() and (folder.resolve() == tmp or tmp in folder.resolve().parents):
        return f"the model is a machine-local temporary folder ({rest}): serve your own copy of it"
    return ""


def argv(ctx: Context, variant: str, max_num_seqs: int) -> list[str]:
    model, pin = model_ref(ctx, variant)
    args = {**eargs.without(ctx.engine_args(variant), "max-num-seqs"), "max-num-seqs": max_num_seqs}
    return ["vllm", "serve", model, *pin, *engine_flags(args, ctx.extra_args(variant))]


def _adopted_levels(
    ctx: Context, load: LoadAnalysis, verdicts: Mapping[str, Verdict], pairs: Mapping[str, Pair], *, regime: str
) -> list[Level]:
    """The baseline's levels, and those of each variant adopted for ``regime`` where it is adopted."""
    out = list(load.ok(ctx.baseline))
    for v, x in verdicts.items():
        rv = x.regimes.get(regime)
        if x.finals.get(regime) != ADOPT or rv is None or pairs[v].inverted:
            continue
        good = {o.setting.value for o in rv.settings if o.outcome == ADOPT and o.setting.dimension == "concurrency"}
        out += [lv for lv in load.ok(v) if regime == THROUGHPUT or not good or lv.concurrency in good]
    return out


def _flags_note(ctx: Context, variant: str, concurrency: int, caps: Mapping[str, Capacity]) -> str:
    args = ctx.engine_args(variant)
    util = eargs.get(args, "gpu-memory-utilization")
    notes = [
        f"gpu-memory-utilization {util} as configured" if util is not None else "gpu-memory-utilization: vLLM's default"
    ]
    mml = eargs.get(args, "max-model-len")
    if mml is not None:
        notes.append(f"max-model-len {mml} as configured")
    cap = caps.get(variant)
    if cap is not None and cap.kv_critical_concurrency is not None:
        crit = cap.kv_critical_concurrency
        notes.append(
            f"KV critical concurrency {crit:,.0f} {'>=' if crit >= concurrency else '<'} {concurrency}"
            + ("" if crit >= concurrency else ": requests beyond it wait for KV blocks (preemption)")
        )
    return "; ".join(notes)


def _row(
    ctx: Context,
    scenario: str,
    lv: Level,
    why: str,
    *,
    caps: Mapping[str, Capacity],
    slo_ttft: float | None,
    slo_tpot: float | None,
) -> dict[str, Any]:
    cmd = argv(ctx, lv.variant, lv.concurrency)
    return {
        "scenario": scenario,
        "status": schemas.STATUS_OK,
        "variant": lv.variant,
        "model": cmd[2],
        "model_source": ctx.model_source(lv.variant) or None,
        "argv": secrets.printable_argv(cmd),  # a secret as the variable holding it: worthit.secrets
        "command": secrets.shell_command(cmd),
        "max_num_seqs": lv.concurrency,
        "concurrency": lv.concurrency,
        "chosen_by": f"max-num-seqs {lv.concurrency}: {why}; {_flags_note(ctx, lv.variant, lv.concurrency, caps)}"
        + (f"; {note}" if (note := local_model_note(ctx, lv.variant)) else ""),
        "slo_ttft_ms": slo_ttft,
        "slo_tpot_ms": slo_tpot,
        "runs": lv.runs,
        "interval_basis": lv.basis,
        **{col: val for key, attr in _LEVEL_ATTR.items() for col, val in measure_cols(key, getattr(lv, attr)).items()},
    }


def deployment_rows(ctx: Context, verdicts: Mapping[str, Verdict], pairs: Mapping[str, Pair]) -> list[dict[str, Any]]:
    load: LoadAnalysis = ctx.analyses["load"]
    caps: Mapping[str, Capacity] = ctx.analyses.get("capacity", {})
    rows: list[dict[str, Any]] = []
    slo = ctx.slo
    grid = sorted({lv.concurrency for v in ctx.variants for lv in load.ok(v)})
    lat = _adopted_levels(ctx, load, verdicts, pairs, regime=LATENCY)
    if slo.ttft_ms is None and slo.tpot_ms is None:
        rows.append(
            {
                "scenario": "latency",
                "status": schemas.STATUS_NOT_APPLICABLE,
                "reason": "no interactive SLO set (slo.ttft_ms, slo.tpot_ms)",
            }
        )
    else:
        meet = [lv for lv in lat if lv.meets(slo)]
        if meet:
            lv = max(meet, key=lambda x: (x.concurrency, -(x.tpot_p50.value or 0.0)))
            why = (
                f"the highest measured concurrency (of {', '.join(map(str, grid))}) whose P99 TTFT "
                f"({lv.ttft_p99.value or 0:,.1f} ms) and P99 TPOT ({lv.tpot_p99.value or 0:,.1f} ms) meet the SLO"
                f" (TTFT <= {slo.ttft_ms or 0:,g} ms, TPOT <= {slo.tpot_ms or 0:,g} ms)"
            )
            spot: SweetSpot | None = ctx.analyses.get("sweet_spot", {}).get(lv.variant)
            found = spot.level() if spot is not None else None
            if spot is not None and found is not None and found.concurrency > lv.concurrency:
                why = (
                    f"the sweet spot the search measured: concurrency {found.concurrency} meets the SLO (TTFT P99 "
                    f"{found.ttft_p99.value or 0:,.1f} ms, TPOT P99 {found.tpot_p99.value or 0:,.1f} ms), "
                    f"{spot.hi if spot.hi is not None else 'no level'} misses it; the grid's best was {lv.concurrency}"
                )
                lv = found
            rows.append(_row(ctx, "latency", lv, why, caps=caps, slo_ttft=slo.ttft_ms, slo_tpot=slo.tpot_ms))
        else:
            rows.append(
                {
                    "scenario": "latency",
                    "status": schemas.STATUS_NOT_APPLICABLE,
                    "reason": "no measured level meets the SLO at P99" if lat else "no load levels",
                }
            )
    ceiling = ctx.rules.throughput_tpot_ms
    thr = _adopted_levels(ctx, load, verdicts, pairs, regime=THROUGHPUT)
    cands = [lv for lv in thr if lv.within(ceiling) and lv.output_tok_per_s.value]
    if cands:
        lv = max(cands, key=lambda x: x.output_tok_per_s.value or 0.0)
        why = f"the level with the most output tok/s {ceiling_text(ceiling)}"
        cap = caps.get(lv.variant)
        if cap is not None and cap.highest_level == lv.concurrency and cap.throughput_knee == lv.concurrency:
            why += (
                f"; throughput still rising at the highest level measured ({lv.concurrency}): more sequences "
                "were not measured, so none are promised"
            )
        rows.append(_row(ctx, "throughput", lv, why, caps=caps, slo_ttft=None, slo_tpot=ceiling))
    else:
        rows.append(
            {
                "scenario": "throughput",
                "status": schemas.STATUS_NOT_APPLICABLE,
                "reason": f"no level stays {ceiling_text(ceiling)}" if thr else "no load levels",
            }
        )
    return rows


def deployments_view(ctx: Context, verdicts: Mapping[str, Verdict], pairs: Mapping[str, Pair]) -> View:
    rows = deployment_rows(ctx, verdicts, pairs)
    cols = [
        Column("scenario", "scenario", TEXT),
        Column("variant", "variant", VARIANT),
        Column("concurrency", "promised at concurrency", INT),
        Column("ttft_ms_p99", "TTFT P99 ms", MEASURE),
        Column("tpot_ms_p99", "TPOT P99 ms", MEASURE),
        Column("tpot_ms_p50", "TPOT P50 ms", MEASURE),
        Column("output_tok_per_s", "output tok/s", MEASURE),
        Column("chosen_by", "chosen by", TEXT),
        Column("reason", "why none", TEXT),
    ]
    caption = (
        "One deployment per objective: latency-first (the SLO-feasible concurrency) and throughput-first (the most "
        "output tok/s under the TPOT ceiling), among the baseline and the adopted variants; each promises the "
        "figures measured at that level. Only measured variants are recommended: adopted optimisations are not "
        "combined untested."
    )
    notes = [
        f"**{r['scenario']}** ({ctx.label(str(r['variant']))}): `{r['command']}`" for r in rows if r.get("command")
    ]
    return View(REPORT_DEPLOYMENTS, "Recommended deployments", caption, cols, rows, order=10, notes=notes)


def validation_rows(ctx: Context, deployments: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for d in deployments:
        scenario = str(d["scenario"])
        files = ctx.results.deployments.get(scenario)
        if d.get("status") != schemas.STATUS_OK or not files:
            continue
        base = {"scenario": scenario, "variant": d.get("variant")}
        served = next((f.metadata.get("argv") for f in files if f.metadata.get("argv")), None)
        if served is not None and list(served) != list(d.get("argv") or []):
            rows.append(
                {
                    **base,
                    "quantity": "command",
                    "outcome": "not validated",
                    "status": schemas.STATUS_OK,
                    "reason": f"served {shlex.join(map(str, served))}, not the recommended command",
                }
            )
            continue
        if not any(f.ok for f in files):
            f = files[0]
            rows.append({**base, "quantity": "all", "outcome": "not validated", "status": f.status, "reason": f.cause})
            continue
        got = level(str(d.get("variant")), int(d.get("concurrency") or 0), files, ctx.slo)
        for key, label, unit, hib in FIGURES:
            promised = {
                k: d.get(k2)
                for k, k2 in (("value", key), ("n", f"{key}_n"), ("lo", f"{key}_ci95_low"), ("hi", f"{key}_ci95_high"))
            }
            m = getattr(got, _LEVEL_ATTR[key])
            if promised["value"] is None or m.value is None:
                continue
            lo = promised["lo"] if promised["lo"] is not None else promised["value"]
            hi = promised["hi"] if promised["hi"] is not None else promised["value"]
            worse = m.value < lo if hib else m.value > hi
            better = m.value > hi if hib else m.value < lo
            rows.append(
                {
                    **base,
                    "quantity": label,
                    "unit": unit,
                    "promised": promised["value"],
                    "promised_n": promised["n"],
                    "promised_ci95_low": promised["lo"],
                    "promised_ci95_high": promised["hi"],
                    **measure_cols("measured", m),
                    "outcome": "miss" if worse else ("better than promised" if better else "met"),
                    "status": schemas.STATUS_OK,
                    "reason": None
                    if promised["lo"] is not None
                    else "the promise had no interval: compared with its value",
                }
            )
    return rows


def validation_view(ctx: Context, deployments: Sequence[Mapping[str, Any]]) -> View:
    cols = [
        Column("scenario", "scenario", TEXT),
        Column("variant", "variant", VARIANT),
        Column("quantity", "figure", TEXT),
        Column("promised", "promised", MEASURE),
        Column("measured", "measured", MEASURE),
        Column("outcome", "outcome", OUTCOME),
        Column("reason", "note", TEXT),
    ]
    caption = (
        "Each recommended command served exactly as printed and loaded at its promised concurrency (validate_"
        "deployment): a miss is a measured value beyond the promised 95% interval on the worse side."
    )
    return View(
        REPORT_VALIDATION,
        "Deployments served: promised vs measured",
        caption,
        cols,
        validation_rows(ctx, deployments),
        order=15,
        empty="Not validated yet: the validate_deployment stage has not run (validate_deployments).",
    )
