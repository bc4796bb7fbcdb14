"""Closed-loop estimates for many operating points at once (``hetplan estimate --points FILE.csv``).

A points table has one row per operating point, its columns named like the ``estimate`` flags: ``engine``,
``model``, ``gpu``, ``tp``, ``pp``, ``ep``, ``dp_attention``, ``weight_dtype``, ``kv_dtype``, ``concurrency``,
``isl``, ``osl`` (optional engine knobs: ``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``,
``gpu_memory_utilization``; blank = the engine's default). Empty cells take the defaults of
:data:`DEFAULTS` (``kv_dtype``: the engine's default for the weight dtype). ``model``, ``gpu``, ``concurrency``,
``isl`` and ``osl`` are required columns; a table without one of them is refused as a whole (:class:`InputError`),
while a row that cannot be predicted (an unknown model, a NaN or negative number, TP that does not divide the heads,
weights that do not fit) gets an ``error`` message and the others are still estimated.

The table is read and checked by :mod:`hetplan.perf.points_table`. The step model and the closed loop are
:mod:`hetplan.perf.closed_loop`, evaluated for all rows together (numpy), so thousands of rows take seconds. Source:
hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.errors import HetplanError, InputError
from hetplan.perf.closed_loop import Rows, SteadyState, build_rows, closed_loop, row_constants
from hetplan.perf.points_table import (
    Point,
    parse_point,
)

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


@dataclass
class Prepared:
    """Rows validated and turned into step-model constants (:func:`prepare_points`); ``out[n]`` holds row n's
    fields (or its ``error``), ``index`` the rows that can be estimated, in order, and ``rows`` their constants."""

    out: list[dict[str, Any]]
    index: list[int]
    points: list[Point]
    kv_tokens: np.ndarray
    notes: list[list[str]]
    rows: Rows | None
    arch_names: list[str]


def check_request_fits(
    prompt_tokens: int, output_tokens: int, kv_capacity_tokens: int, max_model_len: int | None, where: str
) -> None:
    """Refuse a request that no step of the engine could ever hold: longer than ``max_model_len`` (the engine
    rejects it) or than the instance's whole KV cache (it would wait for a slot forever).

    Raises:
        InputError: naming the tokens needed, the tokens available and the knob to change.
    """
    need = prompt_tokens + output_tokens
    if max_model_len is not None and need > max_model_len:
        raise InputError(
            f"a request of {need:,} tokens (prompt {prompt_tokens:,} + output {output_tokens:,}) exceeds "
            f"max_model_len {max_model_len:,}",
            "the engine refuses requests longer than --max-model-len",
            f"raise max_model_len to {need:,} or more, or shorten the prompt or output",
        )
    if need > kv_capacity_tokens:
        raise InputError(
            f"a request of {need:,} tokens (prompt {prompt_tokens:,} + output {output_tokens:,}) can never fit "
            f"the {kv_capacity_tokens:,}-token KV cache of {where}",
            "one sequence must hold its whole context in the KV cache",
            "raise gpu_memory_utilization, lower max_num_batched_tokens or max_num_seqs (smaller activation "
            "reserve), raise TP, use an fp8 KV cache, or shorten the request",
        )


def prepare_points(rows: list[dict[str, Any]], catalog: Catalog | None = None) -> Prepared:
    """Validate every row and build the constants of those that can be estimated (see :func:`estimate_points`;
    models, GPUs and fitted curves from ``catalog``, None: the shipped catalogs)."""
    from hetplan.catalog.context import Catalog
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.calibration import curves_for, normalize_arch
    from hetplan.perf.engines import engine_rules, memory_budget
    from hetplan.perf.estimate import check_gpu_runs

    out: list[dict[str, Any]] = [{} for _ in rows]
    consts: list[dict[str, float]] = []
    index: list[int] = []
    points: list[Point] = []
    kv_tokens: list[int] = []
    notes_all: list[list[str]] = []
    archs: list[str] = []
    cache: dict[tuple[Any, ...], Any] = {}
    cat = catalog or Catalog.shipped()
    for n, raw in enumerate(rows):
        try:
            pt = parse_point(raw)
        except ValueError as exc:
            out[n] = {"row": n + 1, "error": str(exc)}
            continue
        head = {"row": n + 1, **pt.__dict__}
        try:
            key = (pt.model, pt.weight_dtype, pt.kv_dtype)
            if key not in cache:
                cache[key] = ModelArch(cat.find_model(pt.model), pt.weight_dtype, pt.kv_dtype)
            arch = cache[key]
            gkey = ("gpu", pt.gpu)
            if gkey not in cache:
                cache[gkey] = cat.find_gpu(pt.gpu)
            gpu = cache[gkey]
            check_parallelism(arch, gpu, pt.tp, pt.pp, pt.ep, pt.dp_attention)
            check_gpu_runs(gpu, pt.weight_dtype)  # what 'hetplan estimate' refuses (bf16 on Volta)
            rules = engine_rules(pt.engine)
            ckey = ("curves", pt.engine, gpu.name, gpu.arch, gpu.vendor)
            if ckey not in cache:
                cache[ckey] = curves_for(pt.engine, gpu.arch, gpu.vendor, gpu.name, catalog=cat)
            curves, note = cache[ckey]
            seqs = pt.max_num_seqs or rules.max_num_seqs
            budget = pt.max_num_batched_tokens or rules.max_num_batched_tokens
            frac = pt.gpu_memory_utilization
            mkey = ("mem", key, gkey, pt.engine, pt.tp, pt.pp, pt.dp_attention, budget, seqs, frac)
            if mkey not in cache:
                cache[mkey] = memory_budget(arch, gpu, rules, pt.tp, pt.pp, pt.dp_attention, frac, budget, seqs)
            mem = cache[mkey]
            if mem.kv_capacity_tokens <= 0:
                raise InputError(
                    f"{arch.spec.name} ({pt.weight_dtype}) does not fit {gpu.name} at TP {pt.tp} x DP "
                    f"{pt.dp_attention} x PP {pt.pp}",
                    f"{mem.weights_gib:.1f} GiB of weights per GPU, {mem.kv_gib:.1f} GiB left for KV",
                )
            window = arch.spec.max_position_embeddings
            if pt.isl + pt.osl > window:
                raise InputError(f"isl + osl = {pt.isl + pt.osl:,} exceeds {arch.spec.name}'s window of {window:,}")
            if pt.max_model_len is not None and pt.max_model_len > window:
                raise InputError(f"max_model_len {pt.max_model_len:,} exceeds {arch.spec.name}'s window of {window:,}")
            try:
                check_request_fits(
                    pt.isl, pt.osl, mem.kv_capacity_tokens, pt.max_model_len, f"{gpu.name} TP {pt.tp} x PP {pt.pp}"
                )
            except InputError as exc:  # the knob to change goes into the row's message
                raise InputError(f"{exc.what}: {exc.fix}") from None
        except HetplanError as exc:
            out[n] = {**head, "error": exc.what + (f" ({exc.why})" if exc.why else "")}
            continue
        notes = [note] if note else []
        if pt.pp > 1:
            notes.append("PP > 1: stages run one after another for latency; the closed loop keeps one micro-batch")
        span = nodes_note(gpu, pt.tp, pt.dp_attention, pt.pp, bool(arch.spec.is_moe))
        if span:
            notes.append(span)
        ckey2 = ("const", key, gkey, pt.engine, pt.tp, pt.dp_attention, pt.pp, budget, seqs)
        if ckey2 not in cache:
            cache[ckey2] = row_constants(
                arch, gpu, pt.tp, pt.dp_attention, curves, budget, rules.chunked_prefill, seqs, pt.pp
            )
        consts.append(cache[ckey2])
        index.append(n)
        points.append(pt)
        kv_tokens.append(mem.kv_capacity_tokens)
        notes_all.append(notes)
        archs.append(normalize_arch(gpu.arch))
        out[n] = head
    return Prepared(out, index, points, np.array(kv_tokens, dtype=float), notes_all,
                    build_rows(consts) if consts else None, archs)  # fmt: skip


def steady_state(prep: Prepared, rows: Rows | None = None) -> SteadyState:
    """Closed-loop steady state of the estimable rows of ``prep`` (``rows``: other constants, e.g. while fitting)."""
    r = rows if rows is not None else prep.rows
    assert r is not None
    conc = np.array([p.concurrency for p in prep.points], dtype=float)
    isl = np.array([p.isl for p in prep.points], dtype=float)
    osl = np.array([p.osl for p in prep.points], dtype=float)
    return closed_loop(r, conc, isl, osl, np.floor(prep.kv_tokens / (isl + osl)))


def estimate_points(rows: list[dict[str, Any]], catalog: Catalog | None = None) -> list[dict[str, Any]]:
    """Closed-loop estimate of every row (module docstring), in input order, with ``catalog``'s models, GPUs and
    fitted curves (None: the shipped catalogs).

    Returns:
        One dict per row: ``row`` (1-based), the point's fields and ``ttft_s``, ``tpot_s``, ``itl_s`` (the mean
        inter-token latency, equal to TPOT in this steady state), ``output_tokens_per_s`` and ``requests_per_s``
        (whole instance), ``kv_capacity_tokens``, ``fits`` (all C clients' KV fits at once) and ``notes``; or the
        row's fields and ``error``.
    """
    prep = prepare_points(rows, catalog)
    out = prep.out
    if prep.rows is None:
        return out
    ss = steady_state(prep)
    for j, n in enumerate(prep.index):
        pt, kv_tokens, notes = prep.points[j], int(prep.kv_tokens[j]), prep.notes[j]
        fits = pt.concurrency * (pt.isl + pt.osl) <= kv_tokens
        if not fits:
            notes = [*notes, f"{pt.concurrency} x {pt.isl + pt.osl} tokens exceed the {kv_tokens:,}-token KV cache: "
                     "clients queue for a slot"]  # fmt: skip
        out[n].update(
            ttft_s=float(ss.ttft_s[j]),
            tpot_s=float(ss.tpot_s[j]),
            itl_s=float(ss.tpot_s[j]),
            output_tokens_per_s=float(ss.requests_per_s[j]) * pt.osl,
            requests_per_s=float(ss.requests_per_s[j]),
            kv_capacity_tokens=kv_tokens,
            fits=bool(fits),
            notes=notes,
        )
    return out


def check_parallelism(arch: Any, gpu: Any, tp: int, pp: int, ep: int, dp: int) -> None:
    """Refuse a layout the engines refuse (:class:`InputError`, naming the column): TP that neither divides the KV
    heads nor is a multiple of them (GQA), TP not dividing the query heads, EP not dividing the GPUs or beyond the
    experts, PP beyond the layers. A layout larger than the GPU's NVLink domain (``scale_up_gpus``) is not refused:
    it spans several nodes joined by the scale-out network (:func:`nodes_note`, :func:`hetplan.perf.closed_loop.
    node_layout`)."""
    spec = arch.spec
    if spec.num_attention_heads % tp:
        raise InputError(
            f"tp {tp} does not divide the {spec.num_attention_heads} attention heads of {spec.name}",
            fix="choose a tp that divides the attention heads (attention DP, dp_attention, spreads GPUs otherwise)",
        )
    kv = spec.num_key_value_heads
    if not spec.kv_lora_rank and kv % tp and tp % kv:
        raise InputError(
            f"tp {tp} neither divides the {kv} KV heads of {spec.name} nor is a multiple of them",
            fix="choose a tp that divides the KV heads or a multiple of them",
        )
    gpus = tp * dp
    if gpus % ep:
        raise InputError(f"ep {ep} does not divide the {gpus} GPUs (tp {tp} x dp_attention {dp})",
                         fix="choose an ep that divides tp x dp_attention")  # fmt: skip
    if ep > 1 and not spec.is_moe:
        raise InputError(f"ep {ep} needs a mixture-of-experts model; {spec.name} is dense", fix="use ep 1")
    if spec.is_moe and spec.num_experts and ep > spec.num_experts:
        raise InputError(f"ep {ep} exceeds the {spec.num_experts} experts of {spec.name}",
                         fix=f"use an ep of {spec.num_experts} or less")  # fmt: skip
    if pp > arch.layers:
        raise InputError(f"pp {pp} exceeds the {arch.layers} layers", fix=f"use a pp of {arch.layers} or less")
    check_instance_gpus(tp, dp, pp)


MAX_INSTANCE_GPUS = 1024
"""Most GPUs in one instance (``tp x dp_attention x pp``) hetplan estimates: wide expert-parallel deployments run a
few hundred GPUs (DeepSeek-V3's serving: 320 per decode instance); beyond this a layout is a typo, not a plan."""


def check_instance_gpus(tp: int, dp: int, pp: int) -> None:
    """Refuse an instance of more than :data:`MAX_INSTANCE_GPUS` GPUs (:class:`InputError` naming the fields)."""
    gpus = tp * dp * pp
    if gpus > MAX_INSTANCE_GPUS:
        raise InputError(
            f"tp {tp} x dp_attention {dp} x pp {pp} = {gpus:,} GPUs in one instance exceed the "
            f"{MAX_INSTANCE_GPUS:,} hetplan estimates",
            fix="lower tp, dp_attention or pp (an instance spans at most a few hundred GPUs)",
        )


def nodes_note(gpu: Any, tp: int, dp: int, pp: int, moe: bool = False) -> str | None:
    """A sentence for a layout of ``tp x dp x pp`` GPUs that spans more than one node of ``gpu`` (its NVLink domain,
    ``scale_up_gpus``): how many nodes, and the scale-out link the collectives that cross them use (the catalog's
    ``network_gbit_per_s`` per GPU at :data:`hetplan.perf.links.NETWORK_EFFICIENCY`); None inside one node.
    ``moe``: a mixture-of-experts model, whose all-to-all spans the ``tp x dp`` GPUs."""
    from hetplan.perf.links import NETWORK_EFFICIENCY, node_layout

    nodes, tp_nodes, crossing = node_layout(tp, dp, pp, gpu.scale_up_gpus)
    if nodes <= 1:
        return None
    what = []
    if tp_nodes > 1:
        what.append(f"TP all-reduce over {tp_nodes} nodes")
    if moe and tp * dp > gpu.scale_up_gpus and dp > 1:
        what.append("MoE all-to-all")
    if crossing:
        what.append(f"{crossing} PP hand-off{'s' if crossing > 1 else ''}")
    if not what:
        return f"{tp * dp * pp} GPUs span {nodes} nodes of {gpu.scale_up_gpus}: no collective crosses them"
    return (
        f"{tp * dp * pp} GPUs span {nodes} nodes of {gpu.scale_up_gpus}: {', '.join(what)} over the network at "
        f"{gpu.network_gbit_per_s / 8.0:g} GB/s per GPU x {NETWORK_EFFICIENCY:g} (catalog network_gbit_per_s)"
    )


__all__ = [
    "Prepared",
    "MAX_INSTANCE_GPUS",
    "check_instance_gpus",
    "check_parallelism",
    "check_request_fits",
    "estimate_points",
    "nodes_note",
    "prepare_points",
    "steady_state",
]
