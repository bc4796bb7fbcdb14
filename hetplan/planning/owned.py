"""Owned GPUs in a plan: how many of each owned type the plan uses, and, for idle ones, why, with the binding
constraint and its numbers, what that owned type can hold alone at the plan's SLOs, and the smallest SLO relaxation
that would put it to work.

A buyer who owns 8 L40S and is told to rent an H100 instance needs the reason in numbers ("no L40S layout meets
the 1 s p90 TTFT: best 1.38 s, 38 % over") and what the owned fleet can do ("at TTFT 1.5 s the 8 L40S hold
2.1 req/s"), not "the demand is met by other GPUs" (issue 31).

Every figure comes from the planner's own models: the candidate enumeration's idle TTFT of each prefill layout
(:class:`~hetplan.perf.capacity.PrefillCapacity`), batch-1 TPOT of each decode layout
(:class:`~hetplan.perf.capacity.DecodeCapacity`), and the combos' goodput. The owned type's capacity alone is the
largest Σ goodput of its own combos (prefill and decode on that type) within its owned GPU count
(:func:`hetplan.solvers.milp.max_value`): GPU counts, not nodes, so it is an upper bound when TP degrees do not pack
into the owned nodes.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from hetplan.catalog.offers import owned_gpus
from hetplan.errors import InfeasibleError
from hetplan.plan.blocks import OwnedGpu, RelaxedSlo, SloMiss
from hetplan.planning.solve import Planner, Solved
from hetplan.solvers.cauchy import Combo, PlanRequest
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from hetplan.solvers.milp_covering import max_value
from hetplan.units import format_duration, rnd

#: SLO relaxations tried, as factors on the binding SLO's best achievable value (the first that puts the owned
#: type to work is reported). Rounded up to two significant digits, so the figure is one a user would type.
RELAX_FACTORS = (1.05, 1.1, 1.25, 1.5, 2.0, 3.0)


def _round_up_2sig(x: float) -> float:
    """``x`` rounded up to two significant digits (1.234 -> 1.3; 0.0871 -> 0.088)."""
    if x <= 0:
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    return float(round(math.ceil(x / scale - 1e-9) * scale, 12))


def _alone(req: PlanRequest, combos: tuple[Combo, ...] | list[Combo], gpu: str, count: int) -> tuple[float, str]:
    """The most goodput (req/s) ``count`` GPUs of type ``gpu`` hold alone with ``combos`` (those on that type only),
    and the best single combo's label ("" when none)."""
    own = [c for c in combos if c.prefill_gpu == gpu and c.decode_gpu == gpu and not c.cross_site]
    fits = [c for c in own if c.gpus_used()[gpu] <= count]
    if not fits:
        return 0.0, ""
    value = max_value([c.goodput_req_per_s for c in fits], [[c.gpus_used()[gpu] for c in fits]], [count],
                      settings=req.solve)  # fmt: skip
    best = max(fits, key=lambda c: (c.goodput_req_per_s * (count // c.gpus_used()[gpu]), -c.usd_per_hour, c.label))
    return value, best.label


def _binding(req: PlanRequest, planner: Planner, gpu: str, count: int) -> SloMiss | None:
    """The SLO ``count`` owned ``gpu`` miss even idle (``slo``: "ttft"|"tpot", ``slo_s``, ``best_s``, ``layout``)
    over the layouts that fit a 1:1 combo in ``count`` GPUs (a TP8 prefill beside a TP4 decode needs 12), the TTFT
    checked first (with the TPOT under ``also`` when both bind); None when some such layout meets both idle (or none
    fits)."""
    cands = planner.cands
    tps = sorted(o.tp for o in cands.options if o.gpu.name == gpu)
    if not tps or 2 * tps[0] > count:
        return None
    fits = {tp for tp in tps if tp + tps[0] <= count}
    ttfts = [(pc.min_ttft_s, tp) for (name, tp, _), pc in cands.prefill_caps.items() if name == gpu and tp in fits]
    ttft = None
    if ttfts:
        best_ttft, tp = min(ttfts)
        if best_ttft > req.ttft_slo_s:
            ttft = SloMiss(slo="ttft", slo_s=req.ttft_slo_s, best_s=best_ttft, layout=f"TP{tp}")
    opts = [o for o in cands.options if o.gpu.name == gpu and o.tp in fits]
    best = min(opts, key=lambda o: (o.decode.min_tpot_s, o.tp))
    tpot = None
    if best.decode.min_tpot_s > req.tpot_slo_s:
        tpot = SloMiss(slo="tpot", slo_s=req.tpot_slo_s, best_s=best.decode.min_tpot_s, layout=f"TP{best.tp}")
    if ttft is not None:
        return ttft.with_(also=tpot) if tpot is not None else ttft
    return tpot


def _best_s(b: SloMiss) -> float:
    """The best value (seconds) a binding SLO reaches (always set by :func:`_binding`)."""
    return float(b.best_s or 0.0)


def _relaxed(req: PlanRequest, gpu: str, count: int, binding: SloMiss | None) -> RelaxedSlo | None:
    """The smallest relaxation of the binding SLOs (both when both bind; the TTFT when none binds idle: queueing
    leaves no room) by a factor of :data:`RELAX_FACTORS` at which ``count`` owned ``gpu`` hold some goodput alone:
    ``ttft_s`` and/or ``tpot_s``, ``goodput_req_per_s`` and the ``combo`` that does; None when none does."""
    spec = next(g for g in req.gpus if g.name == gpu)
    ttft_base: float | None = req.ttft_slo_s  # none binds idle: the TTFT, queueing leaves no room under it
    tpot_base: float | None = None
    if binding is not None:  # the TTFT binds first (with the TPOT as ``also``), or the TPOT alone
        ttft_base = _best_s(binding) if binding.slo == "ttft" else None
        tpot_base = _best_s(binding) if binding.slo == "tpot" else _best_s(binding.also) if binding.also else None
    only = replace(req, gpus=(spec,), inventory={gpu: count}, offers=(), wan=None, keep_pairs=None)
    for factor in RELAX_FACTORS:
        ttft_s = _round_up_2sig(ttft_base * factor) if ttft_base is not None else None
        tpot_s = _round_up_2sig(tpot_base * factor) if tpot_base is not None else None
        trial = replace(
            only,
            ttft_slo_s=req.ttft_slo_s if ttft_s is None else ttft_s,
            tpot_slo_s=req.tpot_slo_s if tpot_s is None else tpot_s,
        )
        try:
            cands = enumerate_candidates(trial)
        except InfeasibleError:  # no layout meets the relaxed SLOs yet
            continue
        held, label = _alone(trial, cands.combos, gpu, count)
        if held > 0:  # only the SLOs relaxed are written
            slos = {
                **({"ttft_s": ttft_s} if ttft_s is not None else {}),
                **({"tpot_s": tpot_s} if tpot_s is not None else {}),
            }
            return RelaxedSlo(**slos, goodput_req_per_s=rnd(held), combo=label)
    return None


def _missed(req: PlanRequest, b: SloMiss) -> str:
    """``the 500 ms p90 TTFT (best 805 ms at TP4, 61 % over)``: one binding SLO in words."""
    q = round(req.stats.quantile * 100)
    slo_s, best_s = float(b.slo_s or 0.0), _best_s(b)
    over = (best_s / slo_s - 1) * 100
    return (
        f"the {format_duration(slo_s)} p{q} {b.slo.upper()} (best {format_duration(best_s)} at "
        f"{b.layout}, {over:.0f} % over)"
    )


def _rounded(b: SloMiss) -> SloMiss:
    """``b`` with its seconds rounded for the document (:func:`hetplan.units.rnd`)."""
    made = b.with_(slo_s=rnd(b.slo_s) if b.slo_s is not None else None, best_s=rnd(_best_s(b)))
    return made.with_(also=_rounded(b.also)) if b.also is not None else made


def owned_doc(req: PlanRequest, s: Solved, planner: Planner) -> dict[str, OwnedGpu] | None:
    """The plan's ``owned_gpus`` block: per owned GPU type, ``owned``, ``used`` and ``idle`` GPUs; for idle ones an
    ``idle_reason`` sentence with the binding constraint's numbers, ``alone_req_per_s`` (what that type's owned GPUs
    hold alone at the plan's SLOs, req/s; with ``alone_combo``, the combo that does), ``binding`` (the SLO the type
    misses even idle: ``slo``, ``slo_s``, ``best_s``, ``layout``) and ``relaxed`` (the smallest SLO change, in
    seconds, at which the type holds ``goodput_req_per_s`` alone). None when nothing is owned."""
    owned = owned_gpus(req.offers)
    if not owned:
        return None
    used: dict[str, int] = {}
    bought = s.purchase
    for p in bought.lines if bought is not None else ():
        if p.owned:
            used[p.gpu] = used.get(p.gpu, 0) + p.gpus_used
    rows: dict[str, OwnedGpu] = {}
    for gpu, n in owned.items():
        u = used.get(gpu, 0)
        rows[gpu] = OwnedGpu(owned=n, used=u, idle=n - u, **(_why_idle(req, s, planner, gpu, n, u) if n > u else {}))
    return rows


def _why_idle(req: PlanRequest, s: Solved, planner: Planner, gpu: str, n: int, used: int) -> dict[str, Any]:
    """The idle part of one owned type's row (see :func:`owned_doc`): the :class:`~hetplan.plan.blocks.OwnedGpu`
    fields by name, in the order the document writes them."""
    tps = "/".join(map(str, req.tp_options))
    if not any(o.gpu.name == gpu for o in planner.cands.options):
        return {"idle_reason": f"{req.arch.spec.name} does not fit {gpu} at TP {tps} with the workload's context",
                "alone_req_per_s": 0.0}  # fmt: skip
    held, label = _alone(req, planner.cands.combos, gpu, n)
    out: dict[str, Any] = {"alone_req_per_s": rnd(held)}
    if label:
        out["alone_combo"] = label
    demand = req.demand_req_per_s
    if used:
        out["idle_reason"] = (
            f"the demand is met without them (more would only add cost); the {n} owned {gpu} hold at most "
            f"{held:.3g} req/s alone at these SLOs"
        )
        return out
    if held > 0:
        bought = s.purchase
        price = req.prices[gpu].usd_per_gpu_hour if gpu in req.prices else 0.0
        plan_per = s.cost / s.goodput if s.goodput > 0 else 0.0
        own_per = price * n / held
        head = f"the {n} owned {gpu} hold at most {held:.3g} req/s alone at these SLOs ({label})"
        rents = bought is not None and any(not p.owned for p in bought.lines)
        if price > 0 and own_per > plan_per:
            out["idle_reason"] = (
                f"cheaper per req/s {'to rent' if rents else 'on the other GPUs'}: {head}, ${own_per:,.2f}/h per "
                f"req/s at their amortised price, the plan ${plan_per:,.2f}/h per req/s"
            )
        else:
            out["idle_reason"] = (
                f"{head}, {held / demand * 100:.0f} % of the {demand:.3g} req/s demand; "
                + (
                    "renting the rest costs no less than the plan"
                    if rents
                    else "the plan's GPUs serve it at no more cost"
                )
                + " (cheapest purchase; fewest combos on ties)"
            )
        return out
    binding = _binding(req, planner, gpu, n)
    if binding is not None:
        out["binding"] = _rounded(binding)
        reason = f"no {gpu} layout that fits in the {n} owned meets {_missed(req, binding)}"
        if binding.also is not None:
            reason += f", nor {_missed(req, binding.also)}"
    else:
        min_tp = min(o.tp for o in planner.cands.options if o.gpu.name == gpu)
        need = min(
            (c.gpus_used()[gpu] for c in planner.cands.combos if c.prefill_gpu == c.decode_gpu == gpu), default=None
        )
        if 2 * min_tp > n:  # one prefill and one decode instance of the smallest layout
            need = 2 * min_tp
        reason = (
            f"the smallest {gpu} combo that meets the SLOs needs {need} GPUs, {n} owned"
            if need is not None and need > n
            else f"no {gpu} combo meets TTFT {req.ttft_slo_s:g} s and TPOT {req.tpot_slo_s * 1e3:g} ms under load "
            f"for {req.arch.spec.name} at any TP in {tps}"
        )
        if need is not None and need > n:  # a GPU count no SLO change alters
            out["idle_reason"] = reason
            return out
    relaxed = _relaxed(req, gpu, n, binding)
    if relaxed is not None:
        out["relaxed"] = relaxed
        at = " and ".join(f"{which} {format_duration(v)}" for which, v in (("TTFT", relaxed.ttft_s),
                          ("TPOT", relaxed.tpot_s)) if v is not None)  # fmt: skip
        reason += f"; at {at} the {n} {gpu} would hold {relaxed.goodput_req_per_s:.3g} req/s"
    out["idle_reason"] = reason
    return out


__all__ = ["RELAX_FACTORS", "owned_doc"]
