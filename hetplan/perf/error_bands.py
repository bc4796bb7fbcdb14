"""The performance model's own measured error, for the verdict: how much slower than predicted real engines ran.

``catalogs/perf/error_bands.yaml`` (written by ``python benchmarks/fidelity.py --write-error-bands``) holds, per
engine x GPU, per engine and overall, quantiles of the *step slowdown* — measured / predicted − 1 of mean TTFT and
of mean TPOT — on serving points of whole models the fit never saw. Verification
(:func:`hetplan.sim.verify.error_check`) runs a plan with its prefill and decode steps that much slower, at the
chosen confidence (a quantile: p50, p80, p90), and measures how much slower they may run before the plan misses.

Source: hetplan's own reconstruction (issue 34: "the model's error in the verdict").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import yaml

from hetplan.errors import CatalogError, InputError
from hetplan.perf.calibration import perf_catalog_path
from hetplan.perf.settings import PerfCorrection, find_correction

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

#: Quantiles a ``confidence`` may name.
CONFIDENCES = ("p50", "p80", "p90")
#: The confidence verification reports against unless told otherwise.
DEFAULT_CONFIDENCE = "p80"


@dataclass(frozen=True)
class ErrorBand:
    """The model's step slowdown at one confidence for one engine on one GPU.

    Attributes:
        confidence: the quantile (``p80``).
        ttft: prefill step slowdown at that quantile (0.25: real prefill steps 25 % slower than predicted).
        tpot: decode step slowdown at that quantile.
        scope: which rows it comes from, e.g. ``59 held-out rows on H200-SXM, 2 models``.
    """

    confidence: str
    ttft: float
    tpot: float
    scope: str


def parse_confidence(text: str | None) -> str | None:
    """``"p80"``, ``"80"``, ``"80%"`` -> ``"p80"``; ``"none"`` or None -> None.

    Raises:
        InputError: anything else, naming the accepted values.
    """
    if text is None:
        return None
    t = str(text).strip().lower().removesuffix("%").strip()
    if t == "none":
        return None
    t = t if t.startswith("p") else f"p{t}"
    if t not in CONFIDENCES:
        raise InputError(
            f"--confidence {text!r} is not one of {', '.join(CONFIDENCES)} or none",
            fix="pass e.g. --confidence p80 (the model's 80th-percentile error), or none to skip the check",
        )
    return t


@lru_cache(maxsize=4)
def load_error_bands(catalog: Catalog) -> dict[str, Any] | None:
    """``perf/error_bands.yaml`` of ``catalog`` (its folder's, else the shipped one; None when there is none), read
    once per catalog value.

    Raises:
        CatalogError: the file exists but is not an error-band document.
    """
    path = perf_catalog_path("error_bands", catalog)
    if not path.is_file():
        return None
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise CatalogError(f"cannot read {path}", str(exc), "regenerate it with benchmarks/fidelity.py") from None
    if not isinstance(doc, dict) or doc.get("kind") != "perf-error-bands" or not isinstance(doc.get("groups"), list):
        raise CatalogError(f"{path} is not an error-band file", fix="regenerate it with benchmarks/fidelity.py")
    return doc


def error_band(
    engine: str,
    gpus: list[str],
    confidence: str,
    corrections: tuple[PerfCorrection, ...] = (),
    model: str = "",
    layouts: dict[str, set[tuple[int, str]]] | None = None,
    catalog: Catalog | None = None,
) -> ErrorBand | None:
    """The largest slowdown at ``confidence`` among ``gpus`` for ``engine``: each GPU's own group when it has one,
    else the engine's, else the overall figure; negative slowdowns (the model pessimistic there) count as 0.

    A user calibration (``corrections``, ``hetplan calibrate-perf``) narrows it: on a GPU where every layout
    ``(tp, weight_dtype)`` the plan runs (``layouts[gpu]``) has a correction of its own for ``engine`` and
    ``model`` with a band (leave-one-out residuals of at least 3 of the user's points), the widest of those bands'
    TTFT and TPOT slowdowns replace the shipped ones, each never wider than the shipped figure.

    The bands are ``catalog``'s (None: the shipped catalogs).

    Returns:
        The band, or None when no error-band file is shipped.
    """
    from hetplan.catalog.context import Catalog

    doc = load_error_bands(catalog or Catalog.shipped())
    if doc is None:
        return None
    groups = [g for g in doc["groups"] if isinstance(g, dict)]

    def find(eng: str | None, gpu: str | None) -> dict[str, Any] | None:
        return next((g for g in groups if g.get("engine") == eng and g.get("gpu") == gpu), None)

    best: tuple[float, float, str] | None = None
    for gpu in sorted(set(gpus)) or [""]:
        g = find(engine, gpu) or find(engine, None) or find(None, None)
        if g is None:
            continue
        ttft = max(0.0, float(g["ttft"][confidence]))
        tpot = max(0.0, float(g["tpot"][confidence]))
        models = len(g.get("models") or [])
        mine = _calibrated_band(corrections, engine, gpu, model, (layouts or {}).get(gpu, set()), confidence)
        if mine is not None:
            ttft, tpot = min(ttft, mine[0]), min(tpot, mine[1])
            scope = f"your calibration of {model} on {gpu} (leave-one-out residuals)"
        elif g.get("gpu"):
            scope = f"{g['rows']} held-out rows on {g['gpu']}, {models} models"
        elif g.get("engine"):
            scope = f"{g['rows']} held-out rows of this engine, {models} models, too few or none on {gpu}"
        else:
            scope = f"{g['rows']} held-out rows of every engine, {models} models, too few or none of this one"
        if best is None or max(ttft, tpot) > max(best[0], best[1]):
            best = (ttft, tpot, scope)
    if best is None:
        return None
    return ErrorBand(confidence, best[0], best[1], best[2])


def _calibrated_band(
    corrections: tuple[PerfCorrection, ...],
    engine: str,
    gpu: str,
    model: str,
    layouts: set[tuple[int, str]],
    confidence: str,
) -> tuple[float, float] | None:
    """The widest calibrated (TTFT, TPOT) band at ``confidence`` over ``layouts`` on ``gpu``; None unless every
    layout has a correction of its own with a band."""
    if not corrections or not layouts:
        return None
    found = []
    for tp, dtype in sorted(layouts):
        own = find_correction(corrections, engine, gpu, model, tp, dtype)
        band = next(((t, p) for conf, t, p in own.band if conf == confidence), None) if own is not None else None
        if band is None:
            return None
        found.append(band)
    return max(b[0] for b in found), max(b[1] for b in found)


__all__ = ["CONFIDENCES", "DEFAULT_CONFIDENCE", "ErrorBand", "error_band", "load_error_bands", "parse_confidence"]
