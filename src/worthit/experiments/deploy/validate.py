"""Recommended deployments, proven by serving them (the validate_deployment stage).

The report recommends one ``vllm serve`` command per scenario (``report_deployments``: latency-first,
throughput-first) with the concurrency and figures it promises. This stage serves each command exactly as
printed (the supervisor's ``argv`` mode adds only the address, see :func:`worthit.server.argv_command`),
loads it at the promised concurrency with the study's workload, once per ``loadtest.repeats`` run with
fresh prompts, and writes the requests as a load run (``load_requests``) under
``results/<study>/deployment~<scenario>/``. The report sets these measurements against the promise.

A scenario with no recommendation (no variant met its objective, or the report recorded a failure) starts
nothing: its server spec says why, and the validation file is a failure record with that reason.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from worthit import compile_cache, schemas
from worthit.config import ConfigError, Study, config_hash
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.models import Manifest
from worthit.paths import manifest_path
from worthit.provenance import stamp
from worthit.server import ServerState

log = logging.getLogger("worthit")

SCENARIOS = ("latency", "throughput")


def deployment_dir(results: str, scenario: str) -> str:
    """Where a scenario's validation lives: ``results/<study>/deployment~<scenario>``."""
    return f"{results}/deployment~{scenario}"


def recommendation(deployments_path: str | Path, scenario: str) -> dict[str, Any] | None:
    """The ``report_deployments`` row of ``scenario`` (None when the table has none)."""
    rows = [r for r in schemas.read_arrow(deployments_path).to_pylist() if r.get("scenario") == scenario]
    if len(rows) > 1:
        raise ConfigError(f"{deployments_path}: {len(rows)} rows for scenario '{scenario}' (expected one)")
    return rows[0] if rows else None


def serve_spec(study: Study, deployments_path: str | Path, scenario: str, python: str) -> dict[str, Any]:
    """The supervisor's spec for a scenario: its recommended argv, or a refusal that says why there is none."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"unknown deployment scenario {scenario!r} (allowed: {', '.join(SCENARIOS)})")
    rec = recommendation(deployments_path, scenario)
    name = f"deploy-{scenario}"
    if rec is not None and rec.get("status") == "ok" and rec.get("variant") not in study.variants:
        rec = {**rec, "status": "failed", "reason": f"{deployments_path}: unknown variant {rec.get('variant')!r}"}
    if rec is None or rec.get("status") != "ok" or not rec.get("argv"):
        why = (rec or {}).get("reason") or f"the report recommends no {scenario} deployment"
        status = "not_run" if rec is None or rec.get("status") in (None, "ok") else str(rec["status"])
        return {"variant": name, "model_dir": "", "python": python, "refuse": {"status": status, "reason": why}}
    variant = study.variant(str(rec["variant"]))
    return {
        "variant": name,
        "model_dir": "",
        "python": python,
        "argv": list(rec["argv"]),
        "args": variant.engine_args,  # for the hardware gate only; the command is argv
        # the variant's compile cache (resources/vllm-cache): the deployed command starts warm
        "env": compile_cache.with_cache(
            variant.env,
            python,
            variant.model,
            study.cfg["models"][variant.model],
            engine_args=variant.engine_args,
            extra_args=variant.extra_args,
        ),
        "gpus": variant.gpus,
        **({"api_key": study.api_key_source} if study.api_key_source else {}),
        "deployed_variant": variant.name,
        "concurrency": int(rec["concurrency"]),
    }


def validate(
    study: Study,
    scenario: str,
    deployments_path: str,
    spec_path: str,
    *,
    state_path: str,
    out: str,
    run: int = 1,
) -> None:
    """One validation run of a scenario's deployment: the study's workload at the promised concurrency.

    Prompts are built with the deployed variant's tokenizer (its model's manifest under ``resources/``)."""
    spec = json.loads(Path(spec_path).read_text())
    rec = recommendation(deployments_path, scenario) or {}
    meta = stamp(
        scenario=scenario,
        deployed_variant=spec.get("deployed_variant"),
        argv=spec.get("argv"),
        config_hash=config_hash(study.cfg),
        repeat=run,
    )
    if spec.get("refuse"):
        ref = spec["refuse"]
        schemas.write_failure(out, LOAD_REQUESTS, ref["reason"], status=ref["status"], metadata=meta)
        return
    concurrency = int(spec["concurrency"])
    model = study.variant(str(spec["deployed_variant"])).model
    manifest = Manifest.load(manifest_path(model))
    meta.update(concurrency=concurrency, promised=_promise(rec))
    # imported here: the Snakefile imports this module while it parses, and the load generator is not light
    from worthit.stages import consume_in_turn

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows, extra = _load(study, state, manifest, str(spec["deployed_variant"]), concurrency=concurrency, run=run)
        for r in rows:
            r.update(variant=spec["variant"], concurrency=concurrency, request_rate_per_s=None)
        return rows, extra

    # the runs of a deployment are members of one service group, started at once: they take turns (run
    # order), so each loads the server alone at the promised concurrency
    name = f"validate-{scenario}" + (f".rep~{run}" if run > 1 else "")
    timeout = study.cfg["serve"]["startup_timeout_s"]
    consume_in_turn(
        state_path,
        name,
        run - 1,
        timeout,
        out=out,
        table=LOAD_REQUESTS,
        meta=meta,
        body=body,
        api_key=study.api_key,
    )


def _load(
    study: Study, state: ServerState, manifest: Manifest, variant: str, *, concurrency: int, run: int
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    from worthit.experiments.loadtest.measure import study_level
    from worthit.loadgen.levels import CONC, LoadLevel

    log.info("validating %s at concurrency %d (%s)", state.variant, concurrency, " ".join(state.command))
    # the deployed variant's workload, as its load levels measured it; prompts no load level used
    # (seed offset 1000), so prefix caching cannot answer them from a level's cache
    measured = study_level(
        study,
        variant,
        LoadLevel(CONC, concurrency),
        state.url,
        served_model_name=state.served_model_name,
        tokenizer_dir=manifest.model_dir,
        run=run,
        seed_offset=1000,
    )
    return measured.rows, measured.meta


def _promise(rec: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in rec.items() if k not in ("argv", "command", "reason") and not isinstance(v, list)}


def validation_files(results: str, repeats: int) -> list[str]:
    """Every validation run's file, in scenario then run order."""
    return [
        f"{deployment_dir(results, s)}/load" + (f".rep~{r}" if r > 1 else "") + ".parquet"
        for s in SCENARIOS
        for r in range(1, repeats + 1)
    ]
