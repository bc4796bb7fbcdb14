"""Vectorized step-time model and closed-loop steady state (C clients, fixed ISL/OSL), as benchmark tools measure.

**Step time.** One engine step serves ``b`` decoding sequences (each attending over ``ctx`` tokens) and ``p``
prefill tokens (attending over ``p_ctx`` tokens on average). Per GPU of an instance of ``tp x dp`` GPUs (``dp`` =
attention data parallelism; the MoE experts are spread over all of them, by EP or MoE-TP), each operator costs
``max(FLOPs / (peak x eff), bytes / (bandwidth x mbu))`` (a roofline per operator, summed over operators):

- attention projections and dense MLPs (plus shared experts and the LM head): M = tokens on the busiest DP rank,
  weights split by TP; GEMM efficiency ``eff(M)`` from :class:`~hetplan.perf.calibration.EfficiencyCurves`. Decode
  sequences spread over the DP ranks (each sequence, with its KV, on one rank), and a prompt's chunk runs whole on
  one rank (:func:`prefill_rank_tokens`): one prefill or one sequence under attention DP is not ``dp`` times
  faster, and the other ranks wait for the busiest one in the step;
- routed experts: each touched expert sees ``M = tokens x k / touched`` tokens, ``touched = E(1 - (1 - k/E)^T)``
  (DESIGN §2), their weights split over all GPUs, at ``moe_efficiency`` of that roofline;
- attention: decode reads the KV of every sequence (memory-bound, at ``kv_mbu``); prefill computes
  ``4 L_kv w p p_ctx`` FLOPs at ``attention_efficiency`` of the 16-bit peak (``w = d_q``; MLA attends in its
  latent space, ``w = n_q (2 r + rope) / 2``);
- communication: two TP all-reduces per layer, and for MoE across GPUs a dispatch and a combine per MoE layer, each
  ``allreduce_latency_s + bytes / (link_efficiency x link)``; PP ``p``: ``p - 1`` activation hand-offs per step;
- layouts over several nodes (a node is the GPU's NVLink domain, ``scale_up_gpus``): links that cross nodes run at
  the scale-out network's bandwidth plus a latency per hop (:mod:`hetplan.perf.links`: :func:`node_layout
  <hetplan.perf.links.node_layout>`, :func:`communication_s <hetplan.perf.links.communication_s>`);
- ``step_overhead_s + layer_overhead_s x layers + moe_layer_overhead_s x MoE layers + seq_overhead_s x b``.

**Closed loop.** C clients each send an I-token prompt and wait for O output tokens, then send the next at once
(``vllm bench serve --max-concurrency C``, AIPerf, genai-perf). In the steady state with throughput X req/s:
Little's law ``C = X (TTFT + (O-1) TPOT)``; ``b = X (O-1) TPOT`` sequences decode; prefill arrives at ``X I``
tokens/s in chunks of ``min(I, budget)`` tokens (one prompt per step without chunked prefill). A share ``u`` of
the steps carry a prefill chunk and are slower, so the mean TPOT is the harmonic mix ``1 / (u / T_mixed + (1 - u) /
T_decode)``: TPOT grows with concurrency as in measured engines. An engine that runs prefill as steps of its own
ahead of decoding (``prefill_mix`` 0, SGLang's default) stops its decodes for the share ``u`` of the time its
prefill steps take: TPOT ``T_decode / (1 - u)``, and the prompt's steps carry no decodes (``prefill_mix`` between
0 and 1 blends the two). TTFT = the prompt's chunks x T_mixed + the wait
for the step in flight (``T_decode / 2``) + the time outside the prompt's own steps (``ttft_overhead_s +
ttft_token_overhead_s x I + ttft_decode_steps x T_decode``) + an M/D/1 wait for other prompts (``u / (2 (1 - u))``
chunks), and when prefill saturates the budget the wait follows from Little's law instead. A fixed-point
iteration (damped) solves the loop for thousands of rows at once.

Source: hetplan's own reconstruction (roofline per operator after DESIGN §2; Little's law; M/D/1 wait).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hetplan.catalog.schemas import GpuSpec
from hetplan.perf.arch import WEIGHT_BYTES, ModelArch
from hetplan.perf.calibration import EfficiencyCurves
from hetplan.perf.links import NETWORK_EFFICIENCY, communication_s, node_layout
from hetplan.units import GB, TERA

FIXED_POINT_STEPS = 25
DAMPING = 0.5


def _peak_flops(gpu: GpuSpec, weight_dtype: str) -> tuple[float, float]:
    """(dense peak FLOP/s in the GEMM dtype, 16-bit peak FLOP/s for attention)."""
    from hetplan.perf.latency import compute_dtype

    try:
        gemm, _ = gpu.dense_tflops(compute_dtype(weight_dtype))
    except KeyError:
        gemm, _ = gpu.dense_tflops("fp16")
    try:
        half, _ = gpu.dense_tflops("bf16")
    except KeyError:
        half, _ = gpu.dense_tflops("fp16")
    return gemm * TERA, half * TERA


@dataclass
class Rows:
    """Per-row constants of the step model, each a float array of shape (n,). Build with :func:`build_rows`."""

    layers: np.ndarray
    kv_layers: np.ndarray
    moe_layers: np.ndarray
    d_model: np.ndarray
    d_q: np.ndarray
    dense_params: np.ndarray  # per-token matmul params outside routed experts (attention, dense MLP, shared, head)
    expert_params: np.ndarray  # one routed expert of one layer
    experts: np.ndarray  # E (0 for dense)
    topk: np.ndarray
    weight_bytes: np.ndarray  # per param of the block matmuls
    kv_bytes_token: np.ndarray  # whole model
    kv_shards: np.ndarray
    tp: np.ndarray
    dp: np.ndarray
    gpus: np.ndarray
    gemm_flops: np.ndarray
    half_flops: np.ndarray
    mem_bytes_per_s: np.ndarray
    link_bytes_per_s: np.ndarray
    net_bytes_per_s: np.ndarray  # achieved scale-out bandwidth per GPU (NETWORK_EFFICIENCY applied), one direction
    node_gpus: np.ndarray  # GPUs of one node (the NVLink domain)
    tp_nodes: np.ndarray  # nodes one TP group spans
    pp: np.ndarray
    pp_cross: np.ndarray  # PP hand-offs that cross nodes
    gemm_max: np.ndarray
    gemm_half_tokens: np.ndarray
    mbu: np.ndarray
    kv_mbu: np.ndarray
    attention_efficiency: np.ndarray
    step_overhead_s: np.ndarray
    layer_overhead_s: np.ndarray
    moe_layer_overhead_s: np.ndarray
    seq_overhead_s: np.ndarray
    allreduce_latency_s: np.ndarray
    link_efficiency: np.ndarray
    prefill_queue_factor: np.ndarray
    sync_share: np.ndarray
    ttft_overhead_s: np.ndarray
    ttft_token_overhead_s: np.ndarray
    ttft_decode_steps: np.ndarray
    moe_efficiency: np.ndarray
    sync_half_clients: np.ndarray
    prefill_mix: np.ndarray
    budget_tokens: np.ndarray
    chunked: np.ndarray  # 1.0 when the engine splits prompts into chunks
    max_num_seqs: np.ndarray

    def with_curves(self, curves: list[EfficiencyCurves]) -> Rows:
        """A copy whose curve fields come from ``curves`` (one per row)."""
        from dataclasses import replace

        cols = {name: np.array([getattr(c, name) for c in curves], dtype=float) for name in CURVE_FIELDS}
        return replace(self, **cols)


CURVE_FIELDS = (
    "gemm_max",
    "gemm_half_tokens",
    "mbu",
    "kv_mbu",
    "attention_efficiency",
    "step_overhead_s",
    "layer_overhead_s",
    "moe_layer_overhead_s",
    "seq_overhead_s",
    "allreduce_latency_s",
    "link_efficiency",
    "prefill_queue_factor",
    "sync_share",
    "ttft_overhead_s",
    "ttft_token_overhead_s",
    "ttft_decode_steps",
    "moe_efficiency",
    "sync_half_clients",
    "prefill_mix",
)


def _attention_width(arch: ModelArch) -> float:
    """Per-token width of the attention products: ``n_q x head_dim`` (QK and AV); MLA (absorbed, as engines run it
    in decode) attends in the latent space, ``n_q x (kv_lora_rank + rope_dim + kv_lora_rank) / 2``, about four times
    the GQA figure for DeepSeek-V3 (hetplan's own reconstruction)."""
    s = arch.spec
    if s.kv_lora_rank:
        return float(s.num_attention_heads * (2 * s.kv_lora_rank + (s.qk_rope_head_dim or 0)) / 2)
    return float(arch.d_q)


def row_constants(
    arch: ModelArch, gpu: GpuSpec, tp: int, dp: int, curves: EfficiencyCurves, budget: int, chunked: bool, seqs: int,
    pp: int = 1,
) -> dict[str, float]:  # fmt: skip
    """The :class:`Rows` fields of one configuration (``tp`` x ``dp`` GPUs of type ``gpu`` per stage, ``pp`` stages;
    nodes of ``gpu.scale_up_gpus`` GPUs joined by ``gpu.network_gbit_per_s`` per GPU,
    :func:`~hetplan.perf.links.node_layout`)."""
    s = arch.spec
    layers = float(arch.layers)
    moe_layers = float(arch.moe_layers)
    expert = arch.expert_bytes / WEIGHT_BYTES[arch.weight_dtype] if s.is_moe else 0.0
    routed_active = moe_layers * expert * (s.experts_per_token or 0)
    lm_head = float(s.vocab_size * s.hidden_size)
    dense = max(arch.matmul_params_active - routed_active, 0.0) + lm_head
    gemm, half = _peak_flops(gpu, arch.weight_dtype)
    gpus = tp * dp
    _, tp_nodes, pp_cross = node_layout(tp, dp, pp, gpu.scale_up_gpus)
    row = {
        "layers": layers,
        "kv_layers": float(arch.kv_layers),
        "moe_layers": moe_layers,
        "d_model": float(s.hidden_size),
        "d_q": _attention_width(arch),
        "dense_params": dense,
        "expert_params": expert,
        "experts": float(s.num_experts or 0),
        "topk": float(s.experts_per_token or 0),
        "weight_bytes": WEIGHT_BYTES[arch.weight_dtype],
        "kv_bytes_token": arch.kv_bytes_per_token,
        "kv_shards": float(arch.kv_shards(tp)),
        "tp": float(tp),
        "dp": float(dp),
        "gpus": float(gpus),
        "gemm_flops": gemm,
        "half_flops": half,
        "mem_bytes_per_s": gpu.hbm_gb_per_s * GB,
        "link_bytes_per_s": gpu.interconnect_gb_per_s / 2.0 * GB,
        "net_bytes_per_s": gpu.network_gbit_per_s * 1e9 / 8.0 * NETWORK_EFFICIENCY,
        "node_gpus": float(gpu.scale_up_gpus),
        "tp_nodes": float(tp_nodes),
        "pp": float(pp),
        "pp_cross": float(pp_cross),
        "budget_tokens": float(budget),
        "chunked": 1.0 if chunked else 0.0,
        "max_num_seqs": float(seqs),
    }
    for name in CURVE_FIELDS:
        row[name] = float(getattr(curves, name))
    return row


def build_rows(constants: list[dict[str, float]]) -> Rows:
    """Stack per-row constants (:func:`row_constants`) into a :class:`Rows`."""
    names = [f for f in Rows.__dataclass_fields__]
    return Rows(**{n: np.array([c[n] for c in constants], dtype=float) for n in names})


def _op_s(flops: np.ndarray, bytes_: np.ndarray, peak: np.ndarray, eff: np.ndarray, r: Rows) -> np.ndarray:
    out: np.ndarray = np.maximum(flops / (peak * eff), bytes_ / (r.mem_bytes_per_s * r.mbu))
    return out


def prefill_rank_tokens(r: Rows, p: np.ndarray, chunk: np.ndarray) -> np.ndarray:
    """Prefill tokens on the busiest attention-DP rank of a step that carries ``p`` prefill tokens in chunks of
    ``chunk``: a prompt's chunk runs whole on one rank, so at least one chunk (``min(p, chunk)``), and ``p / dp``
    once there are more chunks than ranks. Without attention DP (``dp`` 1) it is ``p``."""
    out: np.ndarray = np.maximum(np.minimum(p, chunk), p / r.dp)
    return out


def step_s(
    r: Rows, b: np.ndarray, ctx: np.ndarray, p: np.ndarray, p_ctx: np.ndarray, p_rank: np.ndarray | None = None
) -> np.ndarray:
    """Seconds of one step: ``b`` decoding sequences over ``ctx`` tokens each and ``p`` prefill tokens over
    ``p_ctx`` tokens of context on average (arrays broadcast over rows; module docstring). ``p_rank``: the prefill
    tokens on the busiest attention-DP rank (:func:`prefill_rank_tokens`; default ``p / dp``, the prefill spread
    evenly). The decode sequences spread over the DP ranks (a whole one on a rank when there are fewer than ranks);
    the step lasts as long as its busiest rank, while the routed experts see every rank's tokens."""
    tokens = np.maximum(b + p, 1.0)
    p_rank = p / r.dp if p_rank is None else p_rank
    # decode sequences on the busiest rank: b / dp, but a whole sequence when there are fewer than dp
    b_rank = np.maximum(b / r.dp, np.minimum(b, 1.0))
    per_rank = np.maximum(b_rank + p_rank, 1.0 / r.dp)
    eff_dense = r.gemm_max * per_rank / (per_rank + r.gemm_half_tokens)
    dense_flops = 2.0 * r.dense_params * per_rank / r.tp
    dense_bytes = r.dense_params * r.weight_bytes / r.tp
    t = _op_s(dense_flops, dense_bytes, r.gemm_flops, eff_dense, r)
    # routed experts, spread over every GPU of the instance
    moe = r.experts > 0
    e = np.where(moe, r.experts, 1.0)
    k = np.where(moe, r.topk, 0.0)
    touched = e * (1.0 - (1.0 - k / e) ** tokens)
    m_exp = np.where(moe, tokens * k / np.maximum(touched, 1e-9), 1.0)
    eff_exp = r.gemm_max * m_exp / (m_exp + r.gemm_half_tokens)
    exp_flops = 2.0 * r.moe_layers * r.expert_params * k * tokens / r.gpus
    exp_bytes = r.moe_layers * r.expert_params * touched * r.weight_bytes / r.gpus
    t = t + np.where(moe, _op_s(exp_flops, exp_bytes, r.gemm_flops, eff_exp, r) / r.moe_efficiency, 0.0)
    # attention: decode reads KV; prefill computes over its context
    kv_read = b_rank * ctx * r.kv_bytes_token / r.kv_shards
    dec_flops = 4.0 * r.kv_layers * r.d_q * b_rank * ctx / r.tp
    t = t + np.maximum(dec_flops / (r.half_flops * r.attention_efficiency), kv_read / (r.mem_bytes_per_s * r.kv_mbu))
    pre_flops = 4.0 * r.kv_layers * r.d_q * p_rank * p_ctx / r.tp
    t = t + pre_flops / (r.half_flops * r.attention_efficiency)
    ar, a2a, handoff = communication_s(r, per_rank, k, moe)
    total: np.ndarray = t + ar + a2a + handoff + r.step_overhead_s + r.layer_overhead_s * r.layers
    total = total + r.moe_layer_overhead_s * r.moe_layers + r.seq_overhead_s * b
    return total


@dataclass(frozen=True)
class SteadyState:
    """Closed-loop steady state per row (arrays of shape (n,)): means as benchmark tools report them."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    requests_per_s: np.ndarray
    decode_batch: np.ndarray
    prefill_share: np.ndarray


def closed_loop(
    r: Rows, concurrency: np.ndarray, isl: np.ndarray, osl: np.ndarray, max_running: np.ndarray | None = None
) -> SteadyState:
    """Steady state of ``concurrency`` clients with ``isl``-token prompts and ``osl``-token outputs (module
    docstring); all arrays of shape (n,). ``max_running``: sequences whose KV fits at once (default: no limit
    beyond ``max_num_seqs``); clients beyond it queue for a slot."""
    c = np.asarray(concurrency, dtype=float)
    i = np.asarray(isl, dtype=float)
    o = np.maximum(np.asarray(osl, dtype=float), 1.0)
    running_cap = np.minimum(c, r.max_num_seqs)
    if max_running is not None:
        running_cap = np.maximum(np.minimum(running_cap, np.asarray(max_running, dtype=float)), 1.0)
    chunk = np.where(r.chunked > 0, np.minimum(i, r.budget_tokens), i)
    chunks = np.ceil(i / chunk)
    ctx = i + o / 2.0
    zero = np.zeros_like(c)
    tpot = step_s(r, running_cap, ctx, zero, zero)
    ttft = chunks * step_s(r, zero, zero, chunk, i / 2.0, chunk)
    u = zero
    x = running_cap / (ttft + (o - 1.0) * tpot)
    for _ in range(FIXED_POINT_STEPS):
        x_new = c / (ttft + (o - 1.0) * tpot)
        x = DAMPING * x + (1 - DAMPING) * x_new
        b = np.clip(x * (o - 1.0) * tpot, 1.0, running_cap)
        # prefill tokens per step carrying prefill: at least one chunk, more when prompts queue up
        t_dec = step_s(r, b, ctx, zero, zero)
        room = np.maximum(r.budget_tokens - b, chunk)  # at least one chunk
        want = x * i * t_dec
        p_step = np.clip(want, chunk, room)
        p_step = np.where(r.chunked > 0, p_step, np.maximum(chunk, np.round(want / i) * i))
        p_rank = prefill_rank_tokens(r, p_step, chunk)
        steps_per_req = i / p_step
        # prefill chunks in the decode steps (mix 1): a share u of the steps carries a chunk and is slower
        t_mix = step_s(r, b, ctx, p_step, i / 2.0, p_rank)
        u_mix = np.clip(x * steps_per_req * t_mix, 0.0, 1.0)
        tpot_mix = 1.0 / (u_mix / t_mix + (1.0 - u_mix) / t_dec)
        # prefill steps of their own (mix 0, prefill first): decodes stop for a share u of the time
        t_pre = step_s(r, zero, zero, p_step, i / 2.0, p_rank)
        u_pre = np.clip(x * steps_per_req * t_pre, 0.0, 0.98)
        tpot_pre = t_dec / (1.0 - u_pre)
        mix = r.prefill_mix
        u = mix * u_mix + (1.0 - mix) * u_pre
        tpot_new = mix * tpot_mix + (1.0 - mix) * tpot_pre
        service = chunks * (mix * t_mix + (1.0 - mix) * t_pre)
        busy = np.minimum(u, 0.98)
        ttft_open = service + t_dec / 2.0 + r.prefill_queue_factor * busy / (2.0 * (1.0 - busy)) * service
        # the closed loop bounds the wait: at worst all C prompts queue at once and drain a full budget per step
        # (the C prompts' tokens when they fill less than the budget; never less than a chunk, as c x i >= i)
        full = np.minimum(room, c * i)
        full_rank = prefill_rank_tokens(r, full, chunk)
        t_full_mix = step_s(r, b, ctx, full, i / 2.0, full_rank)
        t_full = mix * t_full_mix + (1.0 - mix) * step_s(r, zero, zero, full, i / 2.0, full_rank)
        ttft_wave = np.maximum(service, (np.ceil(c * i / room) + 1.0) / 2.0 * t_full)
        sync = r.sync_share + (1.0 - r.sync_share) * c / (c + r.sync_half_clients)
        ttft_new = (1.0 - sync) * np.minimum(ttft_open, ttft_wave) + sync * ttft_wave
        # clients beyond the running cap wait for a slot
        queue = np.maximum(c - running_cap, 0.0) / np.maximum(running_cap, 1.0) * ((o - 1.0) * tpot_new + service)
        front_end = r.ttft_overhead_s + r.ttft_token_overhead_s * i + r.ttft_decode_steps * t_dec
        ttft_new = ttft_new + queue + front_end
        tpot = DAMPING * tpot + (1 - DAMPING) * tpot_new
        ttft = DAMPING * ttft + (1 - DAMPING) * ttft_new
    x = c / (ttft + (o - 1.0) * tpot)
    b = np.clip(x * (o - 1.0) * tpot, 1.0, running_cap)
    return SteadyState(ttft, tpot, x, b, u)


__all__ = [
    "CURVE_FIELDS",
    "Rows",
    "SteadyState",
    "build_rows",
    "closed_loop",
    "prefill_rank_tokens",
    "row_constants",
    "step_s",
]
