"""What per-class sizing saved: the plan's strategy solved again with every request held to the tightest SLOs.

With request classes (a scenario's ``classes:``) the Cauchy combos' prefill capacities hold each class to its own
TTFT over its own requests (:func:`hetplan.perf.capacity.class_prefill_capacities`). :func:`tightest_sizing_note`
solves the plan's strategy once more with that switched off (``PlanRequest.class_slos`` empty: every request held
to the tightest TTFT and TPOT among the classes, the rule before) and says in one plan warning what that plan would
cost. Mélange's aggregated instances are sized on the tightest SLOs either way (their request-size buckets have no
per-class model), so a Mélange plan gets no note.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import replace

from hetplan.errors import HetplanError
from hetplan.planning.solve import Planner
from hetplan.solvers.cauchy import PlanRequest
from hetplan.workload.model import Workload

#: The strategies whose combos are sized per class (the others have nothing to compare).
PER_CLASS_STRATEGIES = ("cauchy", "homogeneous", "mixed")


def tightest_sizing_note(req: PlanRequest, workload: Workload, strategy: str, cost_usd_per_hour: float) -> str | None:
    """One sentence: what ``strategy`` costs ($/h) when every request is held to the tightest SLOs among the
    classes, beside the per-class plan's ``cost_usd_per_hour``; None without classes, for a strategy not sized per
    class, or for a plan without a cost. Costs one more solve of ``strategy`` (candidate enumeration and MILP)."""
    if not req.class_slos or strategy not in PER_CLASS_STRATEGIES or not cost_usd_per_hour > 0:
        return None
    tight = replace(req, class_slos=())
    slos = f"TTFT {req.ttft_slo_s:g} s, TPOT {req.tpot_slo_s * 1e3:g} ms"
    means = (float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean()))
    head = f"request classes sized per class (each class's own TTFT over its own requests): ${cost_usd_per_hour:.2f}/h"
    try:
        other = Planner(tight, means).solve(strategy)
    except HetplanError as exc:  # a what-if: its failure is reported, never fatal to the plan
        return f"{head}; held to the tightest SLOs ({slos}) no {strategy} plan was found ({exc.what})"
    if other.error is not None:
        return f"{head}; held to the tightest SLOs ({slos}) no {strategy} plan meets the target ({other.error.what})"
    diff = other.cost / cost_usd_per_hour - 1.0
    change = "the same" if abs(diff) < 5e-5 else f"{diff:+.1%}"
    return f"{head}; held to the tightest SLOs ({slos}) the {strategy} plan would cost ${other.cost:.2f}/h ({change})"
