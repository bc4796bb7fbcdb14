"""Why a Cauchy plan is infeasible: which SLO no candidate instance meets even idle (:func:`slo_infeasible`), or
which GPU types' inventory keeps the allocation ILP short of the demand, and by how much
(:func:`inventory_infeasible`); each builds the :class:`~hetplan.errors.InfeasibleError` that
:mod:`hetplan.solvers.cauchy` raises.

Source: hetplan's own reconstruction (the diagnostics are not in Cauchy, SoCC 2025).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from hetplan.errors import InfeasibleError
from hetplan.perf.capacity import PrefillCapacity
from hetplan.solvers.milp_covering import max_value, solve_covering

if TYPE_CHECKING:
    from hetplan.solvers.cauchy import Combo, InstanceOption, PlanRequest


def slo_infeasible(
    req: PlanRequest, options: list[InstanceOption], pcap: Callable[[InstanceOption, float], PrefillCapacity]
) -> InfeasibleError:
    q = round(req.stats.quantile * 100)
    best_tpot = min(options, key=lambda o: o.decode.min_tpot_s)
    if best_tpot.decode.min_tpot_s > req.tpot_slo_s:
        return InfeasibleError(
            "the TPOT SLO cannot be met by any candidate decode instance",
            f"TPOT SLO {req.tpot_slo_s * 1e3:.0f} ms binds: the fastest decode step at batch 1 is "
            f"{best_tpot.decode.min_tpot_s * 1e3:.1f} ms ({best_tpot.gpu.name} TP{best_tpot.tp}), "
            f"{(best_tpot.decode.min_tpot_s / req.tpot_slo_s - 1) * 100:.0f} % over",
            "relax --tpot, allow higher TP, or add faster-memory GPUs",
        )
    fastest = min(((pcap(o, o.network_bytes_per_s), o) for o in options), key=lambda x: x[0].min_ttft_s)
    slo, whose, over = req.ttft_slo_s, "", ""
    name = fastest[0].binding_class
    if name is not None:  # request classes: the class whose own TTFT no instance meets, over its own requests
        slo = next((t for n, t, _ in req.class_slos if n == name), slo)
        whose, over = f"class {name}'s ", " over its requests"
    return InfeasibleError(
        "the TTFT SLO cannot be met by any candidate prefill instance",
        f"{whose}TTFT SLO {slo:.3g} s binds: the fastest idle p{q} TTFT (prefill + KV transfer){over} is "
        f"{fastest[0].min_ttft_s:.3g} s ({fastest[1].gpu.name} TP{fastest[1].tp}), "
        f"{(fastest[0].min_ttft_s / slo - 1) * 100:.0f} % over",
        "relax --ttft (or the class's slo.ttft), allow higher TP, or add GPUs with more TFLOPS"
        if name is not None
        else "relax --ttft, allow higher TP, or add GPUs with more TFLOPS",
    )


def inventory_infeasible(
    req: PlanRequest, combos: list[Combo], names: list[str], usage: list[list[int]], cap: list[int | None], what: str
) -> InfeasibleError:
    demand = req.demand_req_per_s
    best = max_value([c.goodput_req_per_s for c in combos], usage, cap, settings=req.solve)
    free = solve_covering(
        [c.usd_per_hour for c in combos],
        [c.goodput_req_per_s for c in combos],
        demand,
        upper=[math.ceil(demand / c.goodput_req_per_s) for c in combos],
        settings=req.solve,
    )
    needs = []
    if free.status == "optimal":
        used: dict[str, int] = {}
        for c, n in zip(combos, free.counts, strict=True):
            for g, k in c.gpus_used().items():
                used[g] = used.get(g, 0) + k * n
        for g in sorted(used):
            have = req.inventory.get(g)
            if have is not None and used[g] > have:
                needs.append(f"needs {used[g]} {g}, inventory has {have}")
    # every inventory type, used by the candidates or not (a type no combo can use is part of the answer too)
    inv = ", ".join(f"{g}={n}" + ("" if g in names else " (no candidate combo uses it)") for g, n in
                    sorted(req.inventory.items()))  # fmt: skip
    why = (
        f"the {what} needs {demand:.2f} req/s (goodput {req.goodput_req_per_s:g} x {1 + req.headroom:g} headroom) "
        f"but the inventory ({inv}) supports at most {best:.2f} req/s within the SLOs, "
        f"{(1 - best / demand) * 100:.0f} % short"
    )
    if needs:
        why += "; the cheapest unconstrained plan " + "; ".join(needs)
    return InfeasibleError(
        f"inventory cannot meet the goodput target for the {what}",
        why,
        "add GPUs to --inventory, lower --goodput or --headroom, or relax the SLOs",
    )
