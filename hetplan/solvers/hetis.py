"""Hetis planner: primary-worker search and head-wise decode attention over a mixed GPU pool (DESIGN §3.3).

What follows the Hetis paper (Mo et al., "Hetis: Serving LLMs in Heterogeneous GPU Clusters with Fine-grained and
Dynamic Parallelism", SC '25):
- dense modules (QKV/O projections, MLP, LM head) and prefill run on a chosen set of strong *primary* workers in a
  DP × PP × TP layout; every other GPU becomes an *attention worker* that holds KV cache and computes decode
  attention for some KV heads of some requests;
- primary sets are tried from the strongest compute tier down; TP stays inside one NVLink/PCIe domain; PP layers
  are split in proportion to stage speed; a layout is feasible when weights/(pp·tp) plus activations fit; the
  layout with the best dense throughput under the TPOT SLO wins, and a device whose inclusion slows the dense
  path (a straggler) is left out and serves attention;
- decode attention is split head by head to minimise the slowest device's time (:mod:`headsplit`).

hetplan's own reconstruction (no Hetis code is public):
- tiers are GPU models ranked by dense TFLOPS in the model's dtype (measured figures from the pool file win);
  a TP group is ``tp`` devices of one domain, fastest first, and runs at its slowest member's speed;
- the dense score of a layout is its request throughput with attention left out, an upper bound on its full
  throughput (layouts scoring 0 miss the TPOT SLO even without attention); layouts are taken best bound first and
  each is evaluated in full with the greedy head split unless its bound is below a throughput already reached
  (then it cannot win); replicas that serve nothing are dropped and their GPUs become attention workers, so DP
  counts serving replicas only; the best ``full_eval_top_n`` are re-evaluated with the exact MILP split (never
  worse than the greedy one) and the best wins;
- the pipeline and throughput model of :mod:`hetis_model`; length classes by decode context; workers are shared
  out to DP replicas by memory bandwidth; a device is a straggler when the best layout that includes it has a lower
  dense throughput than the chosen one.

Every unknown constant is in :class:`HetisSettings`.

The layouts are :mod:`hetplan.solvers.hetis_layout` and their evaluation (dense bound, replicas with the head split)
:mod:`hetplan.solvers.hetis_eval`; this module holds the search over them and says why each device left out of the
primaries serves attention only.
"""

from __future__ import annotations

from dataclasses import dataclass

from hetplan.errors import InfeasibleError, InputError
from hetplan.perf.arch import ModelArch
from hetplan.pool import Device, Pool
from hetplan.solvers.hetis_eval import ReplicaResult, dense_score, evaluate_layout
from hetplan.solvers.hetis_layout import TP_OPTIONS, Layout, enumerate_layouts, tiers
from hetplan.solvers.hetis_model import HetisSettings, Workload, device_speed, eight_bit_refusal
from hetplan.units import GIB


@dataclass(frozen=True)
class LayoutScore:
    """Dense-only score of a layout (request throughput without attention), or why it is infeasible."""

    layout: Layout
    dense_req_per_s: float
    reason: str = ""


@dataclass(frozen=True)
class HetisPlan:
    """The chosen layout, per-replica results, worker assignment, excluded devices with reasons, the layouts
    considered (``scores``, dense bounds) and how many of them the dense bound did not rule out
    (``evaluated_in_full``, with the head split)."""

    layout: Layout
    replicas: tuple[ReplicaResult, ...]
    workers: tuple[tuple[Device, ...], ...]
    excluded: tuple[tuple[Device, str], ...]
    scores: tuple[LayoutScore, ...]
    tiers: tuple[tuple[str, float, int], ...]
    evaluated_in_full: int = 0

    @property
    def req_per_s(self) -> float:
        return sum(r.req_per_s for r in self.replicas)

    @property
    def kv_capacity_tokens(self) -> float:
        return sum(r.kv_capacity_tokens for r in self.replicas)


def plan_hetis(
    arch: ModelArch,
    pool: Pool,
    work: Workload,
    tpot_s: float,
    settings: HetisSettings | None = None,
    ttft_s: float | None = None,
) -> HetisPlan:
    """Search primary workers and split attention (see module docstring). ``tpot_s`` and ``ttft_s`` are the SLOs
    in seconds (a replica whose predicted TTFT misses ``ttft_s`` counts for no throughput).

    Raises:
        InputError: the pool has no GPU that can run the model's GEMMs in its dtype.
        InfeasibleError: no layout fits the weights, or none meets the TPOT SLO even at batch 1.
    """
    settings = settings or HetisSettings()
    ranked = tiers(pool, arch)
    if not ranked:
        raise InputError(
            f"no GPU in pool {pool.name} can run {arch.spec.name}'s matrix multiplies in {arch.weight_dtype}",
            "every device lacks tensor cores for that dtype",
            "plan with --weight-dtype fp16 or add newer GPUs",
        )
    layouts = enumerate_layouts(pool, arch, settings)
    if not layouts:
        raise InfeasibleError(
            f"{arch.spec.name} ({arch.weight_dtype}) fits no primary layout of pool {pool.name}",
            f"weights {arch.weight_bytes / GIB:.1f} GiB; tried TP {TP_OPTIONS} inside each domain and PP up to "
            f"{settings.max_pp}",
            "add GPUs to a domain or quantize the weights (--weight-dtype fp8/int8); max PP has no CLI flag: from "
            "Python, pass settings=HetisSettings(max_pp=...) (hetplan.solvers.hetis_model) to "
            "hetplan.planning.hetis.hetis_plan",
        )
    scores = sorted(
        (LayoutScore(lay, dense_score(arch, pool, lay, work, tpot_s, settings)) for lay in layouts),
        key=lambda s: (-s.dense_req_per_s, len(s.layout.devices), s.layout.label()),
    )
    feasible = [s for s in scores if s.dense_req_per_s > 0]
    if not feasible:
        raise InfeasibleError(
            f"no primary layout meets the TPOT SLO of {tpot_s * 1e3:g} ms even at batch 1",
            f"{len(layouts)} layouts fit the weights; the fastest dense step alone exceeds the SLO",
            "relax --tpot or add faster GPUs",
        )
    # every feasible layout gets the full evaluation with the greedy head split (fast), serving replicas only;
    # the best ``full_eval_top_n`` are then re-evaluated with the exact MILP split and the best of those wins
    greedy: list[tuple[float, LayoutScore, list[ReplicaResult], list[tuple[Device, ...]]]] = []
    seen: set[tuple[tuple[tuple[str, ...], ...], ...]] = set()
    for s in feasible:  # best dense bound first
        if greedy and s.dense_req_per_s < max(g[0] for g in greedy) - 1e-12:
            continue  # its dense bound is below a throughput already reached: it cannot win
        lay, reps, shares = _serving(arch, pool, s.layout, work, tpot_s, settings, False, ttft_s)
        key = _layout_key(lay)
        if key in seen:
            continue
        seen.add(key)
        score = s if lay is s.layout else LayoutScore(lay, dense_score(arch, pool, lay, work, tpot_s, settings))
        greedy.append((sum(r.req_per_s for r in reps), score, reps, shares))
    greedy.sort(key=lambda x: (-x[0], len(x[1].layout.devices), x[1].layout.label()))
    if greedy[0][0] <= 0:
        whys = []
        for _, sc, reps, _ in greedy[:3]:
            parts = "; ".join(f"replica {i}: {r.reason}" for i, r in enumerate(reps) if r.reason)
            whys.append(f"{sc.layout.label()} ({_stage_words(sc.layout)}): {parts or 'serves no request'}")
        raise InfeasibleError(
            f"no Hetis layout of pool {pool.name} meets the SLOs",
            f"{len(greedy)} layouts evaluated, none serves a request; the smallest: " + " | ".join(whys),
            "relax --ttft or --tpot, or add faster GPUs",
        )
    best: tuple[float, LayoutScore, list[ReplicaResult], list[tuple[Device, ...]]] | None = None
    for rate0, sc, _, _ in greedy[: max(1, settings.full_eval_top_n)]:
        if rate0 <= 0:
            break
        lay, reps, shares = _serving(arch, pool, sc.layout, work, tpot_s, settings, True, ttft_s)
        rate = sum(r.req_per_s for r in reps)
        if best is None or rate > best[0] + 1e-12:
            best = (rate, sc if lay is sc.layout else LayoutScore(lay, sc.dense_req_per_s), reps, shares)
    assert best is not None
    evaluated = [(sc, rate) for rate, sc, _, _ in greedy]
    chosen, reps, shares = best[1], best[2], best[3]
    excluded = _excluded(pool, arch, chosen, best[0], scores, evaluated)
    tier_rows = tuple((devs[0].gpu.name, speed, len(devs)) for speed, devs in ranked)
    return HetisPlan(chosen.layout, tuple(reps), tuple(shares), tuple(excluded), tuple(scores), tier_rows, len(greedy))


def _layout_key(layout: Layout) -> tuple[tuple[tuple[str, ...], ...], ...]:
    """Device names per stage per replica: two layouts with the same key are the same layout."""
    return tuple(tuple(tuple(d.name for d in st.devices) for st in rep) for rep in layout.replicas)


def _stage_words(layout: Layout) -> str:
    """``replica 0: A100 TP1 -> RTX-3090 TP1`` style words for an error message."""
    return ", ".join(
        f"replica {i}: " + " -> ".join(f"{st.label} TP{st.tp}" for st in rep) for i, rep in enumerate(layout.replicas)
    )


def _serving(
    arch: ModelArch,
    pool: Pool,
    layout: Layout,
    work: Workload,
    tpot_s: float,
    settings: HetisSettings,
    exact: bool,
    ttft_s: float | None,
) -> tuple[Layout, list[ReplicaResult], list[tuple[Device, ...]]]:
    """Evaluate ``layout``; while some replicas serve nothing (TPOT missed at batch 1, or TTFT above the SLO) and
    others do, drop the idle ones (their devices become attention workers) and evaluate again, so DP counts only
    replicas that serve. Returns the (possibly smaller) layout, its replica results and worker shares."""
    while True:
        reps, shares = evaluate_layout(arch, pool, layout, work, tpot_s, settings, exact, ttft_s)
        keep = [rep for rep, r in zip(layout.replicas, reps, strict=True) if r.req_per_s > 0]
        if not keep or len(keep) == layout.dp:
            return layout, reps, shares
        layout = Layout(tuple(keep))


def _excluded(
    pool: Pool,
    arch: ModelArch,
    chosen: LayoutScore,
    chosen_full: float,
    scores: list[LayoutScore],
    evaluated: list[tuple[LayoutScore, float]],
) -> list[tuple[Device, str]]:
    """Why each device outside the chosen primaries serves attention only (greedy-split throughputs quoted)."""
    primary = {d.name for d in chosen.layout.devices}
    out = []
    for d in pool.devices:
        if d.name in primary:
            continue
        if device_speed(arch, d) <= 0:
            why = eight_bit_refusal(d.gpu, arch) or f"no {arch.weight_dtype} tensor cores"
            out.append((d, f"{why}: no dense work"))
            continue
        with_it = [s for s in scores if any(x.name == d.name for x in s.layout.devices)]
        if not with_it:
            out.append((d, "no primary layout that includes it fits the weights"))
            continue
        top = with_it[0]
        tried = [(s, r) for s, r in evaluated if any(x.name == d.name for x in s.layout.devices)]
        if top.dense_req_per_s <= 0:
            out.append((d, "every layout that includes it misses the TPOT SLO"))
        elif not tried and top.dense_req_per_s >= chosen.dense_req_per_s:
            out.append(
                (
                    d,
                    f"more useful for attention: the best layout with it ({top.layout.label()}) can serve at most "
                    f"{top.dense_req_per_s:.3g} req/s (its dense path alone), below the {chosen_full:.3g} the chosen "
                    "one serves",
                )
            )
        elif top.dense_req_per_s < chosen.dense_req_per_s or not tried:
            out.append(
                (
                    d,
                    f"straggler: the best layout with it ({top.layout.label()}) reaches {top.dense_req_per_s:.3g} "
                    f"req/s dense, the chosen one {chosen.dense_req_per_s:.3g}",
                )
            )
        else:
            s, rate = max(tried, key=lambda x: x[1])  # a layout with it beat the chosen one on dense throughput
            if rate >= chosen_full * (1 - 1e-9):
                out.append(
                    (
                        d,
                        f"a layout with it ({s.layout.label()}) ties with the chosen one at {rate:.3g} req/s; the "
                        "chosen one uses another GPU of the same speed",
                    )
                )
                continue
            out.append(
                (
                    d,
                    f"more useful for attention: best layout with it ({s.layout.label()}) serves {rate:.2f} req/s "
                    f"in all, the chosen one {chosen_full:.2f}",
                )
            )
    return out


__all__ = [
    "HetisPlan",
    "HetisSettings",
    "plan_hetis",
]
