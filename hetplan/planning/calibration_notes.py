"""The plan's warning about a perf calibration file (``perf.calibration``, ``hetplan calibrate-perf``): which
candidate GPUs it corrects for the plan's engine and model (:func:`calibration_notes`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.solvers.cauchy import PlanRequest


def calibration_notes(req: PlanRequest) -> list[str]:
    """Which candidate GPUs a perf calibration file (``perf.calibration``) corrects for the plan's engine and
    model, or that it corrects none of them (the shipped curves alone are then used); empty without a file."""
    s = req.settings
    if not s.calibration_sha256:
        return []
    model = req.arch.spec.name
    dtype = req.arch.weight_dtype
    hit = []
    for g in req.gpus:
        own = [f"TP{t}" for t in req.tp_options if (c := s.correction(g.name, model, t, dtype)) and c.tp]
        if own:
            hit.append(f"{g.name} ({', '.join(own)}: TTFT and TPOT; other TPs: TPOT only)")
        elif any(s.correction(g.name, model, t, dtype) for t in req.tp_options):
            hit.append(f"{g.name} (TPOT only: no point at a TP and {dtype} of this plan)")
    if not hit:
        return [
            f"the perf calibration file corrects no candidate GPU for {s.engine} serving {model}: the shipped curves "
            "are used (calibrate-perf with benchmarks of this engine and model)"
        ]
    return [f"perf calibration: {s.engine} {model} ({dtype}) corrected by your benchmarks on {'; '.join(hit)}"]


__all__ = ["calibration_notes"]
