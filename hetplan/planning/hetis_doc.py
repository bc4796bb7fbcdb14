"""The blocks of the Hetis deployment document (:func:`hetplan.planning.hetis.hetis_plan`; fields described
there): the pool with each device's role, the layout, the head split per length class, the predicted figures, the
baselines and the settings, plus :func:`finite_doc` (inf and NaN written as null).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from typing import Any

from hetplan.pool import Pool
from hetplan.solvers.hetis import HetisPlan
from hetplan.solvers.hetis_baselines import BaselineResult
from hetplan.solvers.hetis_model import HetisSettings, Workload
from hetplan.units import rnd


def finite_doc(value: Any) -> Any:
    """The document with every non-finite float (inf, NaN) replaced by None, so it is always valid JSON (an
    infeasible replica's TPOT, for instance, is infinite in the solver)."""
    if isinstance(value, dict):
        return {k: finite_doc(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_doc(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def settings_doc(settings: HetisSettings) -> dict[str, Any]:
    """The solver settings the plan used, as written under ``settings``."""
    out = asdict(replace(settings, catalog=None))  # the catalog is recorded by its hash, not here
    out.pop("catalog")
    out["length_class_edges_tokens"] = list(settings.length_class_edges_tokens)
    return out


def pool_doc(pool: Pool, plan: HetisPlan) -> dict[str, Any]:
    """The ``pool`` block: GPUs per type, links, speed tiers and one row per device with its role and reason."""
    roles: dict[str, dict[str, Any]] = {}
    for r, rep in enumerate(plan.layout.replicas):
        for s, st in enumerate(rep):
            for k, d in enumerate(st.devices):
                roles[d.name] = {"role": "primary", "replica": r, "stage": s, "tp_rank": k, "layers": st.layers}
    for r, ws in enumerate(plan.workers):
        for d in ws:
            roles[d.name] = {"role": "attention", "replica": r}
    for d, why in plan.excluded:
        roles.setdefault(d.name, {"role": "attention"})["reason"] = why
    for r, result in enumerate(plan.replicas):
        listed = {a.name for a in result.attention}
        for w in plan.workers[r] if r < len(plan.workers) else ():
            if w.name not in listed:
                idle = "no memory left for KV cache"
            elif result.split is None:
                idle = "its replica serves nothing"
            else:
                j = [a.name for a in result.attention].index(w.name)
                if any(row[j] for row in result.split.heads):
                    continue
                idle = "holds no KV head in any length class: its link or memory makes every head slower there"
            row = roles[w.name]
            row["role"] = "unused"
            row.pop("replica", None)
            row["reason"] = f"{row['reason']}; {idle}" if row.get("reason") else idle
    return {
        "name": pool.name,
        "gpus": pool.counts(),
        "links": {
            "intra_node": {
                "gb_per_s": rnd(pool.intra_node.bytes_per_s / 1e9),
                "latency_us": rnd(pool.intra_node.latency_s * 1e6),
            },
            "inter_node": {
                "gb_per_s": rnd(pool.inter_node.bytes_per_s / 1e9),
                "latency_us": rnd(pool.inter_node.latency_s * 1e6),
            },
            "overrides": [
                {
                    "between": list(pair),
                    "gb_per_s": rnd(link.bytes_per_s / 1e9),
                    "latency_us": rnd(link.latency_s * 1e6),
                }
                for pair, link in pool.overrides
            ],
        },
        "tiers": [{"gpu": name, "tflops": rnd(speed), "devices": n} for name, speed, n in plan.tiers],
        "devices": [
            {
                "name": d.name,
                "gpu": d.gpu.name,
                "node": d.node,
                "domain": d.domain,
                "measured": d.measured,
                **roles[d.name],
            }
            for d in pool.devices
        ],
    }


def layout_doc(plan: HetisPlan) -> dict[str, Any]:
    """The ``layout`` block: ``dp``, ``pp``, ``tp`` and each replica's stages."""
    lay = plan.layout
    return {
        "dp": lay.dp,
        "pp": lay.pp,
        "tp": lay.tp,
        "label": lay.label(),
        "replicas": [
            [{"devices": [d.name for d in st.devices], "gpu": st.label, "layers": st.layers} for st in rep]
            for rep in lay.replicas
        ],
        "layouts_considered": len(plan.scores),
        "layouts_evaluated_in_full": plan.evaluated_in_full,
    }


def split_doc(plan: HetisPlan) -> list[dict[str, Any]]:
    """The ``head_split`` block: per replica, the KV heads each device holds for every length class."""
    out = []
    for r, rep in enumerate(plan.replicas):
        if rep.split is None:
            out.append({"replica": r, "status": "infeasible", "reason": rep.reason, "classes": []})
            continue
        names = [d.name for d in rep.attention]
        out.append(
            {
                "replica": r,
                "method": rep.split.method,
                "status": rep.split.status,
                "makespan_s": rnd(rep.split.makespan_s),
                "reason": rep.reason,
                "devices": [
                    {"name": d.name, "role": d.role, "step_s": rnd(t)}
                    for d, t in zip(rep.attention, rep.split.device_s, strict=True)
                ],
                "classes": [
                    {
                        "name": c.name,
                        "requests": c.requests,
                        # 0 requests in the expected batch: kv_heads places one representative request
                        "representative": c.requests == 0,
                        "context_tokens": rnd(c.context_tokens),
                        "kv_heads": {n: h for n, h in zip(names, rep.split.heads[k], strict=True) if h},
                    }
                    for k, c in enumerate(rep.classes)
                ],
            }
        )
    return out


def predicted_doc(plan: HetisPlan, work: Workload, ttft_slo_s: float) -> dict[str, Any]:
    """The ``predicted`` block: capacity at full utilisation (req/s, tokens/s), TPOT and TTFT (seconds)."""
    served = [r for r in plan.replicas if r.req_per_s > 0] or list(plan.replicas)
    return {
        "req_per_s": rnd(plan.req_per_s),
        "output_tokens_per_s": rnd(plan.req_per_s * work.mean_output),
        "tpot_s": rnd(max((r.tpot_s for r in served), default=0.0), 4),
        "ttft_s": rnd(max((r.ttft_s for r in served), default=0.0), 4),
        "ttft_within_slo": all(r.ttft_s <= ttft_slo_s for r in served),
        "kv_capacity_tokens": rnd(plan.kv_capacity_tokens),
        "decode_batch": sum(r.batch for r in plan.replicas),
        "basis": "capacity at full utilisation, no queueing; TTFT = idle q-quantile prefill + one decode step",
    }


def baseline_doc(b: BaselineResult) -> dict[str, Any]:
    """One baseline's block (Splitwise, HexGen): its layout and figures, or why it is infeasible."""
    if b.reason:
        return {"status": "infeasible", "reason": b.reason}
    return {
        "status": "solved",
        "layout": b.layout,
        "req_per_s": rnd(b.req_per_s),
        "tpot_s": rnd(b.tpot_s, 4),
        "ttft_s": rnd(b.ttft_s, 4),
        "kv_capacity_tokens": rnd(b.kv_capacity_tokens),
        "gpus_used": b.gpus_used,
    }
