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
        ckey2 = ("const", key, gkey, pt.engine, pt.tp, pt.dp_attention, budget, seqs)
        if ckey2 not in cache:
            cache[ckey2] = row_constants(arch, gpu, pt.tp, pt.dp_attention, curves, budget, rules.chunked_prefill, seqs)
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
    """Refuse a layout the engines refuse (:class:`InputError`): TP that neither divides the KV heads nor is a
    multiple of them (GQA), TP not dividing the query heads, EP not dividing the GPUs or beyond the experts, or more
    GPUs in one TP x DP group than the GPU's NVLink scale-up domain (``scale_up_gpus``)."""
    spec = arch.spec
    if spec.num_attention_heads % tp:
        raise InputError(f"TP {tp} does not divide the {spec.num_attention_heads} attention heads of {spec.name}")
    kv = spec.num_key_value_heads
    if not spec.kv_lora_rank and kv % tp and tp % kv:
        raise InputError(
            f"TP {tp} neither divides the {kv} KV heads of {spec.name} nor is a multiple of them",
            fix="choose a TP that divides the KV heads or a multiple of them",
        )
    gpus = tp * dp
    if gpus % ep:
        raise InputError(f"EP {ep} does not divide the {gpus} GPUs (TP {tp} x DP {dp})")
    if ep > 1 and not spec.is_moe:
        raise InputError(f"EP {ep} needs a mixture-of-experts model; {spec.name} is dense", fix="use ep 1")
    if spec.is_moe and spec.num_experts and ep > spec.num_experts:
        raise InputError(f"EP {ep} exceeds the {spec.num_experts} experts of {spec.name}")
    if gpus > gpu.scale_up_gpus:
        raise InputError(
            f"TP {tp} x DP {dp} = {gpus} GPUs exceed {gpu.name}'s NVLink domain of {gpu.scale_up_gpus}",
            fix="lower TP/DP or use a GPU in a larger scale-up domain (GB200/GB300 NVL72)",
        )
    if pp > arch.layers:
        raise InputError(f"PP {pp} exceeds the {arch.layers} layers")


__all__ = ["Prepared", "check_parallelism", "check_request_fits", "estimate_points", "prepare_points", "steady_state"]
