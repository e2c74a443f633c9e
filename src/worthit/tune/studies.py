"""The studies a tune writes from the user's (:func:`own_study`): its candidates' (:mod:`.candidates`) and its
accuracy screens' (:mod:`.accuracy_gate`), each measuring its own variants and nothing the user's study
configured beside them."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from worthit.config import validate


def own_study(
    cfg: Mapping[str, Any], *, study: str, variants: Mapping[str, Any], baseline: str, source: str
) -> dict[str, Any]:
    """``cfg`` as the study ``study`` of ``variants`` only (``baseline`` among them), validated with its
    defaults filled: no tune of its own, and none of the sections that name the user's variants (the sweet
    spot's, the workload levels, the decision's effort) nor deployment validation."""
    out = copy.deepcopy(dict(cfg))
    out.pop("tune", None)
    out["study"] = study
    out["variants"] = dict(variants)
    out["baseline_variant"] = baseline
    out["sweet_spot"] = {**(out.get("sweet_spot") or {}), "variants": []}
    out["loadtest"] = {**out["loadtest"], "workload_levels": []}
    if isinstance(out.get("decide"), Mapping):
        out["decide"] = {**out["decide"], "effort": {}}
    out["validate_deployments"] = False
    return validate(out, source)
