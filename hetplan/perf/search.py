"""``hetplan estimate --gpus N``: search the layouts of a GPU budget and trade throughput against interactivity.

Given one model, one GPU type, one engine, a budget of ``N`` GPUs and a fixed request shape (ISL input tokens, OSL
output tokens), every way to serve it on at most ``N`` of those GPUs is estimated with the closed-loop model of
:mod:`hetplan.perf.closed_loop` (through :mod:`hetplan.perf.points`: no second model):

- **aggregated**: ``N // g`` replicas of one instance layout of ``g = TP x PP x DP`` GPUs (``EP`` for MoE models
  spans the instance's ``TP x DP`` GPUs), each at a closed-loop concurrency ``C`` from :data:`CONCURRENCY` while all
  ``C`` sequences' KV fits (``C x (ISL + OSL)`` tokens) and ``C <= max_num_seqs``;
- **disaggregated**: ``n_p`` prefill instances of one layout and ``n_d`` decode instances of another
  (``n_p g_p + n_d g_d <= N``). A prefill instance is the closed loop with one output token (prompts only) at
  concurrency ``c_p``; a decode instance runs ``b`` sequences at the mean context ``ISL + OSL / 2``:
  ``TPOT = step_s(b)`` and it finishes ``b / ((OSL - 1) TPOT)`` requests/s. The rates are matched: for each decode
  point the prefill side runs at the smallest ``c_p`` whose ``n_p`` instances keep up (a decode point the prefill
  side cannot feed is dropped: the same system appears at a smaller ``b``). TTFT adds the prompt's KV transfer over
  the scale-out network (:func:`hetplan.perf.latency.kv_transfer_s`, conservative inside one NVLink node).

Each point reports output tokens/s per GPU used, tokens/s per user (``1 / TPOT``), mean TTFT and TPOT (the means a
closed-loop benchmark reports, not percentiles) and the clients in flight. The Pareto front keeps the points no
other beats on both tokens/s/GPU and tokens/s/user; the best layout under an SLO is the front's highest tokens/s/GPU
whose mean TTFT and TPOT meet it (ties: fewer GPUs, then the faster user).

Source: hetplan's own reconstruction of what NVIDIA AIConfigurator's ``cli default`` search reports (aggregated vs
disaggregated Pareto of tokens/s/GPU against tokens/s/user), on hetplan's step model.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

#: Closed-loop concurrencies tried per aggregated instance and decode batches per decode instance.
CONCURRENCY = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
#: Prompts in flight tried per prefill instance.
PREFILL_CONCURRENCY = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
#: Largest GPU budget searched (disaggregated splits grow with the square of the instance counts).
MAX_GPUS = 64
#: Largest pipeline-parallel degree tried (PP serves latency badly; engines rarely run more than 4 stages).
MAX_PP = 4


@dataclass(frozen=True)
class Layout:
    """One instance's parallel layout: ``tp x pp x dp`` GPUs; ``ep`` experts ranks (1 for dense models)."""

    tp: int
    pp: int = 1
    ep: int = 1
    dp: int = 1

    @property
    def gpus(self) -> int:
        """GPUs of one instance."""
        return self.tp * self.pp * self.dp

    @property
    def label(self) -> str:
        """Short name, e.g. ``TP4``, ``TP2PP2``, ``TP1DP8EP8``."""
        out = f"TP{self.tp}"
        out += f"PP{self.pp}" if self.pp > 1 else ""
        out += f"DP{self.dp}" if self.dp > 1 else ""
        out += f"EP{self.ep}" if self.ep > 1 else ""
        return out


@dataclass(frozen=True)
class BudgetPoint:
    """One operating point of a layout (module docstring); rates are whole-system figures over ``gpus`` GPUs."""

    mode: str  # "agg" or "disagg"
    layout: str  # e.g. "2xTP4" (two replicas) or "P1xTP2+D3xTP2" (one prefill, three decode instances)
    gpus: int
    concurrency: float  # clients in flight, whole system
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    ttft_s: float
    tpot_s: float
    requests_per_s: float
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BudgetSearch:
    """Result of :func:`search_budget`: the Pareto front (fastest user first), the best point per mode under the
    SLO (``None`` when none meets it), how many points were estimated and what was skipped, with reasons."""

    model: str
    gpu: str
    engine: str
    gpus: int
    isl: int
    osl: int
    weight_dtype: str
    kv_dtype: str
    ttft_slo_s: float
    tpot_slo_s: float
    pareto: list[BudgetPoint]
    best: dict[str, BudgetPoint | None]
    points_estimated: int
    skipped: list[str]

    def to_doc(self) -> dict[str, Any]:
        """The ``--json`` document (seconds and tokens/s as floats)."""
        doc = asdict(self)
        return doc


def candidate_layouts(is_moe: bool, n_gpus: int, scale_up: int) -> list[Layout]:
    """Every layout of at most ``n_gpus`` GPUs: TP and DP powers of two with ``TP x DP`` within one NVLink domain
    (``scale_up``), PP up to :data:`MAX_PP`; attention DP and EP only for mixture-of-experts models (EP 1 or the
    whole ``TP x DP`` group). Layouts the engines refuse for this model are dropped later
    (:func:`hetplan.perf.points.check_parallelism`)."""
    pow2 = [2**k for k in range(8) if 2**k <= n_gpus]
    out: list[Layout] = []
    for tp in pow2:
        for dp in pow2 if is_moe else [1]:
            if tp * dp > scale_up:
                continue
            for pp in [p for p in pow2 if p <= MAX_PP]:
                if tp * dp * pp > n_gpus:
                    continue
                eps = sorted({1, tp * dp}) if is_moe else [1]
                out.extend(Layout(tp, pp, ep, dp) for ep in eps)
    return out


def _row(engine: str, model: str, gpu: str, wd: str, kv: str | None, lay: Layout, c: int, isl: int, osl: int
         ) -> dict[str, Any]:  # fmt: skip
    return {"engine": engine, "model": model, "gpu": gpu, "tp": lay.tp, "pp": lay.pp, "ep": lay.ep,
            "dp_attention": lay.dp, "weight_dtype": wd, "kv_dtype": kv or "", "concurrency": c, "isl": isl,
            "osl": osl}  # fmt: skip


def pareto_front(points: list[BudgetPoint]) -> list[BudgetPoint]:
    """Points no other point beats on both tokens/s/user and tokens/s/GPU (ties kept once), fastest user first."""
    order = sorted(points, key=lambda p: (-p.tokens_per_s_per_user, -p.tokens_per_s_per_gpu, p.gpus, p.layout))
    front: list[BudgetPoint] = []
    best_gpu = -1.0
    for p in order:
        if p.tokens_per_s_per_gpu > best_gpu * (1 + 1e-9):
            front.append(p)
            best_gpu = p.tokens_per_s_per_gpu
    return front


def best_under_slo(points: list[BudgetPoint], ttft_s: float, tpot_s: float) -> BudgetPoint | None:
    """Highest tokens/s/GPU among ``points`` whose mean TTFT and TPOT meet the SLO (ties: fewer GPUs, faster user,
    layout name); ``None`` when none does."""
    ok = [p for p in points if p.ttft_s <= ttft_s and p.tpot_s <= tpot_s]
    if not ok:
        return None
    return min(ok, key=lambda p: (-p.tokens_per_s_per_gpu, p.gpus, -p.tokens_per_s_per_user, p.layout))


def search_budget(
    model: str,
    gpu: str,
    n_gpus: int,
    isl: int,
    osl: int,
    engine: str = "vllm",
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    ttft_slo_s: float = 2.0,
    tpot_slo_s: float = 0.1,
    disaggregated: bool = True,
    catalog: Catalog | None = None,
) -> BudgetSearch:
    """Estimate every aggregated and disaggregated layout of ``n_gpus`` GPUs of ``gpu`` serving ``model`` at
    ``isl`` input and ``osl`` output tokens per request (module docstring), with ``catalog``'s model, GPU and fitted
    curves (None: the shipped catalogs).

    Raises:
        InputError: ``n_gpus`` outside [1, :data:`MAX_GPUS`], ISL or OSL below 1, an unknown model, GPU or engine,
            or no layout of the budget that fits the model (the message gives the reason for the largest one).
    """
    from hetplan.catalog.context import Catalog
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.closed_loop import step_s
    from hetplan.perf.engines import default_kv_dtype, engine_rules
    from hetplan.perf.latency import kv_transfer_s, network_bytes_per_s
    from hetplan.perf.points import estimate_points, prepare_points
    from hetplan.perf.settings import PerfSettings

    if not 1 <= n_gpus <= MAX_GPUS:
        raise InputError(f"--gpus {n_gpus} is outside 1 .. {MAX_GPUS}", fix=f"pass a GPU budget of 1 to {MAX_GPUS}")
    if isl < 1 or osl < 1:
        raise InputError(f"--isl {isl} / --osl {osl}: both must be at least 1", fix="pass e.g. --isl 2048 --osl 512")
    rules = engine_rules(engine)
    cat = catalog or Catalog.shipped()
    spec = cat.find_model(model)
    gspec = cat.find_gpu(gpu)
    kv = kv_dtype or default_kv_dtype(rules.name, weight_dtype)
    arch = ModelArch(spec, weight_dtype, kv)
    layouts = candidate_layouts(spec.is_moe, n_gpus, gspec.scale_up_gpus)

    def row(lay: Layout, c: int, o: int) -> dict[str, Any]:
        return _row(rules.name, spec.name, gspec.name, weight_dtype, kv, lay, c, isl, o)

    # which layouts fit at all, and their KV room (one row each)
    probe = prepare_points([row(lay, 1, osl) for lay in layouts], cat)
    fitting: list[tuple[Layout, int]] = []
    skipped: list[str] = []
    for lay, out in zip(layouts, probe.out, strict=True):
        if "error" in out:
            skipped.append(f"{lay.label}: {out['error']}")
    for j, n in enumerate(probe.index):
        fitting.append((layouts[n], int(probe.kv_tokens[j])))
    if not fitting:
        why = skipped[-1] if skipped else "no layout"
        raise InputError(
            f"no layout of {n_gpus} {gspec.name} GPUs serves {spec.name} at {isl:,} + {osl:,} tokens",
            why,
            "raise --gpus, use a GPU with more memory, or lower --weight-dtype (fp8)",
        )
    seqs = rules.max_num_seqs
    points: list[BudgetPoint] = []
    estimated = 0

    # aggregated: replicas of one layout at closed-loop concurrency C
    agg_rows: list[tuple[Layout, int]] = []
    for lay, kv_tokens in fitting:
        room = min(seqs, kv_tokens // (isl + osl))
        agg_rows.extend((lay, c) for c in CONCURRENCY if c <= room)
    agg = estimate_points([row(lay, c, osl) for lay, c in agg_rows], cat)
    estimated += len(agg_rows)
    for (lay, c), est in zip(agg_rows, agg, strict=True):
        if "error" in est or est["tpot_s"] <= 0:
            continue
        reps = n_gpus // lay.gpus
        used = reps * lay.gpus
        tps = est["output_tokens_per_s"] * reps
        points.append(BudgetPoint(
            "agg", f"{reps}x{lay.label}", used, float(c * reps), tps / used, 1.0 / est["tpot_s"], est["ttft_s"],
            est["tpot_s"], est["requests_per_s"] * reps,
            {"instances": reps, "layout": asdict(lay), "concurrency_per_instance": c},
        ))  # fmt: skip

    if disaggregated and osl >= 2 and n_gpus >= 2:
        single = [(lay, kv_t) for lay, kv_t in fitting if lay.pp == 1 and lay.gpus < n_gpus]
        # prefill tables: prompts only (one output token) at c_p prompts in flight
        pre_rows = [(lay, c) for lay, kv_t in single for c in PREFILL_CONCURRENCY if c <= min(seqs, kv_t // (isl + 1))]
        pre = estimate_points([row(lay, c, 1) for lay, c in pre_rows], cat)
        estimated += len(pre_rows)
        prefill: dict[Layout, list[tuple[float, float, int]]] = {}  # layout -> [(req/s, ttft, c_p)] by c_p
        for (lay, c), est in zip(pre_rows, pre, strict=True):
            if "error" not in est:
                prefill.setdefault(lay, []).append((est["requests_per_s"], est["ttft_s"], c))
        # decode tables: b sequences at the mean context
        dec_rows = [(lay, b) for lay, kv_t in single for b in CONCURRENCY if b <= min(seqs, kv_t // (isl + osl))]
        decode: dict[Layout, list[tuple[float, float, int]]] = {}  # layout -> [(req/s, tpot, b)]
        if dec_rows:
            prep = prepare_points([row(lay, b, osl) for lay, b in dec_rows], cat)
            estimated += len(dec_rows)
            if prep.rows is not None:
                b_arr = np.array([float(p.concurrency) for p in prep.points])
                zero = np.zeros_like(b_arr)
                tpot = step_s(prep.rows, b_arr, np.full_like(b_arr, isl + osl / 2.0), zero, zero)
                for j, n in enumerate(prep.index):
                    lay, b = dec_rows[n]
                    t = float(tpot[j])
                    decode.setdefault(lay, []).append((b / ((osl - 1) * t), t, b))
        settings = PerfSettings(engine=rules.name)
        for lp, ptab in prefill.items():
            for ld, dtab in decode.items():
                link = network_bytes_per_s(gspec, min(lp.tp, ld.tp), settings)
                xfer = float(kv_transfer_s(arch, isl, link, settings))
                for n_p in range(1, n_gpus // lp.gpus + 1):
                    for n_d in range(1, (n_gpus - n_p * lp.gpus) // ld.gpus + 1):
                        used = n_p * lp.gpus + n_d * ld.gpus
                        for rate_d, t, b in dtab:
                            demand = n_d * rate_d
                            match = next((p for p in ptab if n_p * p[0] >= demand), None)
                            if match is None:
                                continue
                            ttft = match[1] + xfer
                            points.append(BudgetPoint(
                                "disagg", f"P{n_p}x{lp.label}+D{n_d}x{ld.label}", used,
                                demand * (ttft + (osl - 1) * t), demand * osl / used, 1.0 / t, ttft, t, demand,
                                {"prefill": {"instances": n_p, "layout": asdict(lp), "concurrency": match[2]},
                                 "decode": {"instances": n_d, "layout": asdict(ld), "batch": b},
                                 "kv_transfer_s": xfer},
                            ))  # fmt: skip
    front = pareto_front(points)
    best = {
        "overall": best_under_slo(points, ttft_slo_s, tpot_slo_s),
        "agg": best_under_slo([p for p in points if p.mode == "agg"], ttft_slo_s, tpot_slo_s),
        "disagg": best_under_slo([p for p in points if p.mode == "disagg"], ttft_slo_s, tpot_slo_s),
    }
    return BudgetSearch(spec.name, gspec.name, rules.name, n_gpus, isl, osl, weight_dtype, kv, ttft_slo_s,
                        tpot_slo_s, front, best, estimated, skipped)  # fmt: skip


__all__ = ["BudgetPoint", "BudgetSearch", "Layout", "best_under_slo", "candidate_layouts", "pareto_front",
           "search_budget"]  # fmt: skip
