"""``hetplan calibrate``'s typed ``cascade`` block (:class:`CascadeCalibration`, made by
:func:`hetplan.sim.calibrate.calibrate`): κ per class, the chosen q₂ and the sweep it was chosen from. Read by
attribute; ``to_doc()`` gives the block as the plan file and ``--json`` carry it (:class:`hetplan.sim.result.Doc`).

Source: hetplan's own reconstruction (CASCADE's safety coefficient and Tier-2 share, after the CASCADE paper).
"""

from __future__ import annotations

from pydantic import Field

from hetplan.sim.result import Doc, _absent


class Q2Point(Doc):
    """One q₂ of ``hetplan calibrate``'s sweep: goodput (req/s), joint attainment, Jain's index, objective."""

    q2: float
    goodput_req_per_s: float
    attainment: float
    jain_index: float | None
    objective: float | None = Field(default=None, exclude_if=_absent)


class ClassCalibration(Doc):
    """One class of the calibrated ``cascade`` block: SLOs, κ, median T̂ and TTFT budget (s)."""

    ttft_slo_s: float
    tpot_slo_s: float
    kappa: float
    median_estimate_s: float | None
    median_budget_s: float | None


class CalibratedOn(Doc):
    """What the calibration ran on: the trace, the rate scale and the requests κ was fitted on."""

    trace: str
    rate_scale: float
    requests: int


class CascadeCalibration(Doc):
    """``hetplan calibrate``'s ``cascade`` block (:func:`hetplan.sim.calibrate.calibrate`)."""

    kappa: float
    kappa_by_class: dict[str, float]
    q2: float
    q2_by_class: dict[str, float] | None = Field(default=None, exclude_if=_absent)
    q2_objective: str | None = Field(default=None, exclude_if=_absent)
    tier2_order: str
    quantile: float
    coverage: float
    calibrated_on: CalibratedOn
    classes: dict[str, ClassCalibration]
    q2_sweep: list[Q2Point]
    warnings: list[str]


__all__ = ["CalibratedOn", "CascadeCalibration", "ClassCalibration", "Q2Point"]
