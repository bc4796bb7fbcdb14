"""The plan's ``cascade`` block: CASCADE's settings as ``hetplan calibrate`` (or a verification under CASCADE)
writes them, typed and checked.

The fields the simulator and the router read are declared and checked here (``kappa`` > 0, ``q2`` in [0, 1], each
per class too, the Tier-2 order, the per-class SLOs > 0 in seconds); the calibration's reports (``q2_sweep``,
``coverage``, ...) are kept as written. Numbers keep their written type (an int stays an int) so the block writes
back the same bytes. A field of the wrong type or range raises pydantic's ``ValidationError`` whose location names
it (:func:`hetplan.plan.docblocks.cascade_of` turns it into the one-line error that names ``cascade.<field>``).

Source: hetplan's own reconstruction (what :mod:`hetplan.sim.calibrate` writes).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import StrictFloat, StrictInt, field_validator

from hetplan.plan.blocks.base import Block

#: A number as written, never a string or a bool (an int stays an int).
StrictNum = StrictInt | StrictFloat


def _positive(value: float | None, what: str) -> float | None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a finite number > 0")
    return value


def _share(value: float | None, what: str) -> float | None:
    if value is not None and not (0.0 <= value <= 1.0):
        raise ValueError(f"{what} must be a number in [0, 1]")
    return value


class CascadeClass(Block):
    """One class of ``cascade.classes``: the SLOs (seconds, > 0) the simulator gives its requests when neither the
    run nor the plan's request classes set them."""

    ttft_slo_s: StrictNum | None = None
    tpot_slo_s: StrictNum | None = None

    @field_validator("ttft_slo_s", "tpot_slo_s")
    @classmethod
    def _slo(cls, v: float | None) -> float | None:
        return _positive(v, "an SLO")


class CascadeSettings(Block):
    """CASCADE's settings a plan carries (see the module docstring); None where the block does not write a field
    (the simulator then uses :class:`hetplan.sim.cascade.CascadeSettings`'s defaults)."""

    kappa: StrictNum | None = None
    kappa_by_class: dict[str, StrictNum] | None = None
    q2: StrictNum | None = None
    q2_by_class: dict[str, StrictNum] | None = None
    tier2_order: Literal["least-budget", "largest-budget"] | None = None
    quantile: StrictNum | None = None
    classes: dict[str, CascadeClass] | None = None

    @field_validator("kappa")
    @classmethod
    def _kappa(cls, v: float | None) -> float | None:
        return _positive(v, "kappa")

    @field_validator("q2")
    @classmethod
    def _q2(cls, v: float | None) -> float | None:
        return _share(v, "q2")

    @field_validator("kappa_by_class")
    @classmethod
    def _kappas(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for name, k in (v or {}).items():
            _positive(k, f"kappa of class {name!r}")
        return v

    @field_validator("q2_by_class")
    @classmethod
    def _shares(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        for name, q in (v or {}).items():
            _share(q, f"q2 of class {name!r}")
        return v


__all__ = ["CascadeClass", "CascadeSettings", "StrictNum"]
