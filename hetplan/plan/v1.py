"""Reading version-1 plan files (hetplan 0.1 before the typed plan): :func:`upgrade_v1` makes them version 2.

Version 1 recorded names only; the model and GPU entries are resolved here, once, from ``scenario.model_config``,
the profiled entries under ``scenario.profiles`` and the catalog, and Mélange bucket labels are parsed. A v1 plan
whose model or deployed GPU the catalog no longer knows is refused with the fix (re-plan).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError
from hetplan.plan.schema import SCHEMA_VERSION
from hetplan.plan.types import DEFAULT_ENGINE

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


def _hi(x: float) -> float | None:
    return None if math.isinf(x) else x


_RANGE = re.compile(
    r"^\s*in (?P<plo>[\d.e+]+?)(?:-(?P<phi>[\d.e+]+)|\+), out (?P<olo>[\d.e+]+?)(?:-(?P<ohi>[\d.e+]+)|\+)\s*$"
)


def parse_bucket_label(label: str) -> tuple[float, float, float, float]:
    """``"in 0-512, out 64-128"`` (a version-1 Mélange bucket label) → ``(0, 512, 64, 128)``; ``+`` → upper inf.

    Raises:
        InputError: the label is not in that form.
    """
    m = _RANGE.match(label)
    if not m:
        raise InputError(f"plan instance bucket {label!r} is not readable", fix="write the plan with this hetplan")
    inf = float("inf")
    return (
        float(m["plo"]),
        float(m["phi"]) if m["phi"] else inf,
        float(m["olo"]),
        float(m["ohi"]) if m["ohi"] else inf,
    )


def upgrade_v1(doc: dict[str, Any], where: str = "plan", catalog: Catalog | None = None) -> dict[str, Any]:
    """A version-1 plan document as version 2: the model and GPU entries resolved (profiled entries recorded
    under ``scenario.profiles``, a ``config.json`` under ``scenario.model_config``, else ``catalog``; None: the
    shipped catalogs), bucket labels parsed, provenance marked as unknown.

    Raises:
        InputError: the model or a deployed GPU cannot be resolved any more (the fix: re-plan).
    """
    from hetplan import __version__
    from hetplan.catalog.context import Catalog

    catalog = catalog or Catalog.shipped()

    sc = dict(doc["scenario"])
    config = sc.get("model_config")
    model: dict[str, Any]
    try:
        if config:
            model = {"source": "config.json", "path": str(config), "spec": catalog.find_model(str(config))}
        else:
            model = {"source": "catalog", "spec": catalog.find_model(str(sc["model"]))}
    except InputError as exc:
        raise InputError(
            f"{where} (a version-1 plan) names model {sc['model']!r}, which cannot be resolved now",
            exc.why or exc.what,
            "re-plan with this hetplan: version-2 plans carry the model architecture",
        ) from None
    profiled: dict[str, tuple[GpuSpec, str]] = {}
    for rec in sc.get("profiles") or []:
        raw = rec.get("gpu_spec") if isinstance(rec, Mapping) else None
        if raw is not None:
            try:
                spec = GpuSpec.model_validate(raw)
            except ValidationError as exc:
                raise InputError(
                    f"{where} scenario.profiles[].gpu_spec is not a valid GPU entry: {exc.errors()[0]['msg']}",
                    fix="re-plan with hetplan plan --profile to record it again",
                ) from None
            profiled[spec.name] = (spec, str(rec.get("file", "")))
    used = {c[k] for c in doc.get("combos") or [] for k in ("prefill_gpu", "decode_gpu")}
    used |= {t["gpu"] for t in doc.get("instances") or []}
    gpus: list[dict[str, Any]] = []
    for name in list(dict.fromkeys(list(sc.get("gpus") or []) + sorted(used))):
        if name in profiled:
            gpus.append({"source": "profile", "path": profiled[name][1], "spec": profiled[name][0]})
            continue
        try:
            gpus.append({"source": "catalog", "spec": catalog.find_gpu(str(name))})
        except InputError as exc:
            if name in used:
                raise InputError(
                    f"{where} (a version-1 plan) deploys GPU {name!r}, which cannot be resolved now",
                    exc.why or exc.what,
                    "re-plan with this hetplan: version-2 plans carry the GPU entries",
                ) from None
    out = dict(doc)
    out["schema_version"] = SCHEMA_VERSION
    out["engine"] = DEFAULT_ENGINE
    out["resolved"] = {
        "model": {**model, "spec": model["spec"].model_dump(mode="json", exclude_none=True)},
        "gpus": [{**g, "spec": g["spec"].model_dump(mode="json", exclude_none=True)} for g in gpus],
    }
    out["provenance"] = {
        "hetplan_version": str(doc.get("hetplan_version") or __version__),
        "catalog_sha256": f"unknown (version-1 plan; resolved against {catalog.sha256})",
        "workload_sha256": None,
    }
    out["instances"] = [
        {
            **t,
            "buckets": [
                dict(zip(("prompt_tokens", "output_tokens"), _pairs(parse_bucket_label(lbl)), strict=True))
                | {"share": float(share)}
                for lbl, share in sorted((t.get("buckets") or {}).items())
            ]
            if isinstance(t.get("buckets"), Mapping)
            else t.get("buckets", []),
        }
        for t in doc.get("instances") or []
    ]
    return out


def _pairs(b: tuple[float, float, float, float]) -> tuple[list[float | None], list[float | None]]:
    return [b[0], _hi(b[1])], [b[2], _hi(b[3])]
