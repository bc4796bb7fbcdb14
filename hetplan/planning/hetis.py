"""The Hetis deployment spec: ``hetplan plan --strategy hetis --pool POOL.yaml`` (DESIGN §3.3).

Hetis plans a fixed pool (no goodput ILP), so it cannot be a Cauchy plan document; it is priced like the others
(the whole pool at the pool file's ``usd_per_gpu_hour``, owned GPUs at their amortised price, else ``--prices``,
else the catalog: ``total_usd_per_hour``, ``tokens_per_usd``), and a goodput target the pool cannot meet is an
infeasibility (exit 1) naming what binds each replica. It writes its own kind, ``hetis-deployment``, which
``hetplan emit`` and ``hetplan report`` refuse with a clear message. **No serving engine runs Hetis today**: the
document is a spec for one (roles per device, the primary layout, the head table per length class), not files to
deploy.

Document fields (all numbers rounded to 6 significant digits, never inf or NaN: a non-finite value is written as
null; same inputs give byte-identical output):

- ``kind`` ``hetis-deployment``, ``schema_version`` 1, ``strategy`` ``hetis``, ``engine_note``.
- ``scenario``: model, dtypes, SLOs (``ttft_s``, ``tpot_s``, ``percentile``), workload summary, goodput target.
- ``pool``: name, GPUs per type, links; ``devices``: one row per GPU with ``role`` (``primary``, ``attention``, or
  ``unused``: an attention worker that holds no KV head in any class), ``replica``, ``stage``, ``tp_rank``,
  ``layers`` (primaries), and ``reason`` (non-primaries: why not primary, and why unused).
- ``layout``: ``dp``, ``pp``, ``tp`` and per replica its stages (devices, GPU type or ``A+B`` for a mixed TP group,
  layers); ``layouts_considered`` and ``layouts_evaluated_in_full`` (the rest were ruled out by their dense bound).
- ``head_split``: per replica the length classes (``requests`` in the running batch, ``context_tokens``) with the
  KV heads each device holds for every request of the class, the per-device step time and the solver used. A
  class with 0 requests in the expected batch (``representative: true``) still lists a placement: that of one
  representative request added on top of the batch's split (:func:`headsplit.place_representative`).
- ``predicted``: ``req_per_s``, ``output_tokens_per_s``, ``tpot_s``, ``ttft_s`` (idle q-quantile prefill + one
  step; no queueing), ``kv_capacity_tokens``, ``decode_batch``; ``baselines`` (Splitwise-style, HexGen-style) and
  ``throughput_ratio_over`` each, ``kv_capacity_ratio_over_splitwise``.
- ``total_usd_per_hour``, ``usd_per_month``, ``tokens_per_usd``, ``output_tokens_per_usd`` (null when a GPU type
  has no price), ``prices`` per GPU type with sources, ``tokens_per_usd_basis``.
- ``purchase`` (only when the pool file prices every GPU type: an owned pool): the pool's nodes as owned purchase
  lines, one per (GPU type, GPUs per node), adding up to ``total_usd_per_hour`` (:func:`owned_purchase`).
- ``settings``: :class:`HetisSettings` in force.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hetplan import __version__
from hetplan.catalog.context import Catalog
from hetplan.catalog.pricing import resolve_price
from hetplan.errors import InfeasibleError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import compute_dtype
from hetplan.plan.types import HOURS_PER_MONTH
from hetplan.planning.hetis_doc import (
    baseline_doc,
    finite_doc,
    layout_doc,
    pool_doc,
    predicted_doc,
    settings_doc,
    split_doc,
)
from hetplan.planning.offers import user_prices as _user_prices
from hetplan.planning.request import _model, build_workload
from hetplan.pool import Pool, load_pool
from hetplan.scenario import Scenario
from hetplan.solvers.hetis import HetisPlan, plan_hetis
from hetplan.solvers.hetis_baselines import hexgen, splitwise
from hetplan.solvers.hetis_model import HetisSettings, Workload
from hetplan.units import parse_duration_s, parse_percentile, rnd
from hetplan.workload.context import served_workload

KIND = "hetis-deployment"
ENGINE_NOTE = (
    "No serving engine runs Hetis today (the paper's system is not public): this is a deployment spec for one, "
    "not files to deploy. hetplan emit and hetplan report do not read it."
)
MAX_SAMPLES = 2000


def hetis_plan(
    scenario: Scenario, pool_path: str | Path, settings: HetisSettings | None = None, catalog: Catalog | None = None
) -> dict[str, Any]:
    """Plan ``scenario`` on the pool file with Hetis and both baselines, with ``catalog``'s GPUs, models, prices and
    fitted curves (None: the shipped catalogs); return the ``hetis-deployment`` document.

    Raises:
        InputError: bad scenario or pool file. InfeasibleError: no primary layout fits or meets the TPOT SLO.
    """
    catalog = catalog or Catalog.shipped()
    settings = replace(settings or HetisSettings(), catalog=catalog)
    pool = load_pool(pool_path, catalog)
    arch = _model(scenario, catalog)
    quantile = parse_percentile(scenario.slo.percentile, "slo.percentile")
    ttft = parse_duration_s(scenario.slo.ttft, "ttft")
    tpot = parse_duration_s(scenario.slo.tpot, "tpot")
    workload = build_workload(scenario)
    warnings: list[str] = []
    # the engine's over-context rule (hetplan.workload.context): refused prompts out, outputs cut at the window
    workload, note = served_workload(workload, arch.spec.max_position_embeddings, arch.spec.name)
    if note:
        warnings.append(note)
    ignored = [flag for flag, value in (("--gpus", scenario.gpus), ("--inventory", scenario.inventory)) if value]
    if ignored:
        warnings.append(f"{', '.join(ignored)} ignored: the pool file sets the GPUs")
    planner_only = [
        flag
        for flag, field in (("--tp", "tp"), ("--max-ratio", "max_ratio"), ("--headroom", "headroom"))
        if field in scenario.model_fields_set
    ]
    if planner_only:
        warnings.append(
            f"{', '.join(planner_only)} ignored: Hetis tries TP 1, 2, 4 and 8 inside each link domain, has no n:m "
            "prefill/decode combos and reports the pool's capacity (no provisioning headroom)"
        )
    warnings.extend(_estimate_warnings(pool, arch))
    prompt, output = workload.sample(MAX_SAMPLES)
    work = Workload(prompt, output, quantile)
    plan = plan_hetis(arch, pool, work, tpot, settings, ttft)
    base = {f.__name__: f(arch, pool, work, ttft, tpot, settings) for f in (splitwise, hexgen)}
    doc: dict[str, Any] = {
        "schema_version": 1,
        "kind": KIND,
        "hetplan_version": __version__,
        "strategy": "hetis",
        "engine_note": ENGINE_NOTE,
        "scenario": {
            "name": scenario.name,
            "model": arch.spec.name,
            "weight_dtype": arch.weight_dtype,
            "kv_dtype": arch.kv_dtype,
            "slo": {"ttft_s": ttft, "tpot_s": tpot, "percentile": rnd(quantile * 100)},
            "workload": workload.summary(),
            "goodput_target_req_per_s": scenario.goodput_req_per_s,
        },
        "pool": pool_doc(pool, plan),
        "layout": layout_doc(plan),
        "head_split": split_doc(plan),
        "predicted": predicted_doc(plan, work, ttft),
    }
    doc["baselines"] = {name: baseline_doc(b) for name, b in base.items()}
    doc["throughput_ratio_over"] = {
        name: rnd(plan.req_per_s / b.req_per_s, 4) if b.req_per_s > 0 else None for name, b in base.items()
    }
    sw = base["splitwise"].kv_capacity_tokens
    doc["kv_capacity_ratio_over_splitwise"] = rnd(plan.kv_capacity_tokens / sw, 4) if sw > 0 else None
    if scenario.goodput_req_per_s is not None and plan.req_per_s < scenario.goodput_req_per_s:
        raise _short_of_target(pool, plan, scenario.goodput_req_per_s, tpot)
    doc.update(_cost_doc(pool, scenario, plan, workload, warnings, catalog))
    lines = owned_purchase(pool, doc["pool"]["devices"])
    if lines:
        doc["purchase"] = lines
    doc["warnings"] = warnings
    doc["settings"] = settings_doc(settings)
    finite: dict[str, Any] = finite_doc(doc)
    return finite


def _pool_prices(pool: Pool, scenario: Scenario, catalog: Catalog) -> dict[str, tuple[float, str]]:
    """$/GPU-hour and source per GPU type of the pool: the pool file's ``usd_per_gpu_hour`` (owned GPUs at their
    amortised price), else ``--prices``, else the catalog (``--cloud``, ``--spot``); types no source prices are
    left out."""
    own = dict(pool.usd_per_gpu_hour)
    user = _user_prices(scenario, catalog)
    out: dict[str, tuple[float, str]] = {}
    for name in pool.counts():
        if name in own:
            out[name] = (own[name], "pool file: owned, amortised")
            continue
        gpu = next(d.gpu for d in pool.devices if d.gpu.name == name)
        price = resolve_price(catalog.find_gpu(gpu.name), catalog, scenario.cloud, scenario.spot, user)
        if price is not None:
            out[name] = (price.usd_per_gpu_hour, price.source)
    return out


def _cost_doc(
    pool: Pool, scenario: Scenario, plan: HetisPlan, workload: Any, warnings: list[str], catalog: Catalog
) -> dict[str, Any]:
    """$/h of the whole pool (owned GPUs are paid for whether a role uses them or not), tokens/USD at the plan's
    capacity (input+output and output only, as the other strategies report them) and the prices used."""
    prices = _pool_prices(pool, scenario, catalog)
    counts = pool.counts()
    missing = sorted(set(counts) - set(prices))
    block: dict[str, Any] = {
        "prices": {g: {"usd_per_gpu_hour": rnd(p), "source": src} for g, (p, src) in sorted(prices.items())},
        "tokens_per_usd_basis": "input+output tokens per USD at the pool's Hetis capacity (the whole pool priced)",
    }
    if missing:
        warnings.append(
            f"no price for {', '.join(missing)}: the plan has no $/h; give usd_per_gpu_hour in the pool file "
            "(owned GPUs at their amortised price) or pass --prices"
        )
        block.update(total_usd_per_hour=None, usd_per_month=None, tokens_per_usd=None, output_tokens_per_usd=None)
        return block
    total = sum(counts[g] * prices[g][0] for g in counts)
    prompt, output = float(workload.prompt_tokens.mean()), float(workload.output_tokens.mean())
    per_usd = (lambda tokens: rnd(3600 * plan.req_per_s * tokens / total)) if total > 0 else (lambda tokens: None)
    block.update(
        total_usd_per_hour=rnd(total),
        usd_per_month=rnd(total * HOURS_PER_MONTH),
        tokens_per_usd=per_usd(prompt + output),
        output_tokens_per_usd=per_usd(output),
    )
    return block


def owned_purchase(pool: Pool, devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``purchase`` lines of a pool whose every GPU type the pool file prices (owned, amortised): one line per
    (GPU type, GPUs of that type in one node), ``count`` nodes of that shape at ``gpus x usd_per_gpu_hour`` each,
    ``gpus_used`` the devices with a role (not ``unused``); Σ count x usd_per_hour_each equals the pool's
    ``total_usd_per_hour``. Empty when any type is priced otherwise (catalog or ``--prices``): a pool node (mixed
    GPU types, its own links) is not a purchasable instance type (docs/purchases.md, "Not done").

    Source: hetplan's own reconstruction.
    """
    own = dict(pool.usd_per_gpu_hour)
    if not own or set(pool.counts()) - set(own):
        return []
    per_node: dict[tuple[str, str], int] = {}
    used: dict[tuple[str, str], int] = {}
    for d in devices:
        key = (str(d["node"]), str(d["gpu"]))
        per_node[key] = per_node.get(key, 0) + 1
        used[key] = used.get(key, 0) + (d.get("role") != "unused")
    shapes: dict[tuple[str, int], list[int]] = {}
    for (node, gpu), k in per_node.items():
        shapes.setdefault((gpu, k), [0, 0])
        shapes[(gpu, k)][0] += 1
        shapes[(gpu, k)][1] += used[(node, gpu)]
    return [
        {
            "provider": "owned",
            "instance_type": f"owned-{gpu}-{k}gpu",
            "region": "",
            "gpu": gpu,
            "gpus_per_instance": k,
            "count": n,
            "owned": True,
            "usd_per_hour_each": rnd(k * own[gpu]),
            "gpus_used": gpus_used,
        }  # fmt: skip
        for (gpu, k), (n, gpus_used) in sorted(shapes.items())
    ]


def _short_of_target(pool: Pool, plan: HetisPlan, target: float, tpot_slo_s: float) -> InfeasibleError:
    """The infeasibility of a pool whose Hetis capacity is below the goodput target, naming what binds each replica
    (the TPOT SLO, the KV cache or an SLO missed at batch 1) and the shortfall."""
    short = target - plan.req_per_s
    binds = []
    for r, rep in enumerate(plan.replicas):
        if rep.req_per_s <= 0:
            binds.append(f"replica {r}: serves nothing ({rep.reason or 'misses an SLO at batch 1'})")
        elif rep.tpot_s >= 0.95 * tpot_slo_s:
            binds.append(
                f"replica {r}: the TPOT SLO ({rep.tpot_s * 1e3:.0f} ms per step at batch {rep.batch}, SLO "
                f"{tpot_slo_s * 1e3:g} ms)"
            )
        else:
            binds.append(
                f"replica {r}: KV cache memory ({rep.kv_capacity_tokens:,.0f} tokens hold a batch of {rep.batch} at "
                f"{rep.tpot_s * 1e3:.0f} ms per step, under the TPOT SLO {tpot_slo_s * 1e3:g} ms)"
            )
    return InfeasibleError(
        f"the pool {pool.name} serves {plan.req_per_s:.3g} req/s with Hetis, below the goodput target {target:g} "
        f"req/s (short by {short:.3g} req/s, {short / target * 100:.0f} %)",
        "binding: " + "; ".join(binds),
        "add GPUs to the pool, relax the TPOT SLO, lower --goodput, or plan rented GPUs with --strategy cauchy",
    )


def _estimate_warnings(pool: Pool, arch: ModelArch) -> list[str]:
    """The catalog-estimate warnings a Cauchy plan gives (:mod:`hetplan.api`), for every GPU type of the pool whose
    dense TFLOPS in the model's dtype is an estimate and that the pool file gives no measured figure for."""
    out = []
    for name in pool.counts():
        devs = [d for d in pool.devices if d.gpu.name == name and not d.measured]
        if not devs:
            continue
        gpu = devs[0].gpu
        try:
            tflops, estimated = gpu.dense_tflops(compute_dtype(arch.weight_dtype))
        except KeyError:
            continue
        if estimated and gpu.measured is None:
            note = gpu.estimate_note or "no published value"
            out.append(
                f"{gpu.name}: {tflops:g} TFLOPS is an estimate, not a datasheet figure ({note}); give "
                "measured_tflops in the pool file to replace it"
            )
    return out
