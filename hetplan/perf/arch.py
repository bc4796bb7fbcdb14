"""Architecture arithmetic: parameter counts, weight bytes, FLOPs and KV bytes per token.

Conventions (DESIGN §2):
- A multiply-add is 2 FLOPs. Prefill attention counts the causal half: ``2 * L * s**2 * d_q`` FLOPs for a prompt
  of s tokens (QK^T and AV together); decode attention over c cached tokens costs ``4 * L * d_q * c``.
- Embedding lookups cost no FLOPs; the LM head runs once per sequence in prefill and once per token in decode.
- Quantized weights (fp8, int8, int4) apply to the linear layers of the transformer blocks; embeddings and the
  LM head stay at 16 bits, as GPTQ/AWQ/FP8 checkpoints ship them.

Source: DESIGN §2 formulas; hetplan's own reconstruction for MoE expert coverage and MLA KV size.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from hetplan.catalog.schemas import ModelSpec
from hetplan.errors import InputError

# fp4: NVFP4/MXFP4, 4-bit values plus one 8-bit scale per 16 values (NVFP4; MXFP4 has one per 32)
WEIGHT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5, "fp4": 0.5625}
# the KV dtypes `hetplan emit` can express as a vLLM --kv-cache-dtype (a 16-bit cache follows the model dtype)
KV_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
EMBED_BYTES = 2.0
ArrayLike = float | np.ndarray


def check_dtypes(weight_dtype: str, kv_dtype: str) -> None:
    """Raise :class:`InputError` for an unknown weight or KV dtype, listing the valid ones."""
    if weight_dtype not in WEIGHT_BYTES:
        raise InputError(
            f"weight dtype {weight_dtype!r} is not supported",
            f"supported: {', '.join(WEIGHT_BYTES)}",
            "pass e.g. --weight-dtype bf16",
        )
    if kv_dtype not in KV_BYTES:
        raise InputError(
            f"KV dtype {kv_dtype!r} is not supported", f"supported: {', '.join(KV_BYTES)}", "pass e.g. --kv-dtype fp8"
        )


@dataclass(frozen=True)
class ModelArch:
    """A model with its weight and KV dtypes; every size below is for the whole model (divide by TP/PP).

    Attributes:
        spec: catalog record.
        weight_dtype: one of ``bf16, fp16, fp8, int8, int4, fp4``.
        kv_dtype: one of ``bf16, fp16, fp8``.
    """

    spec: ModelSpec
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"

    def __post_init__(self) -> None:
        check_dtypes(self.weight_dtype, self.kv_dtype)

    # -- shapes ---------------------------------------------------------------------------------------
    @property
    def layers(self) -> int:
        """Number of transformer layers L."""
        return self.spec.num_hidden_layers

    @property
    def d_model(self) -> int:
        """Hidden size d."""
        return self.spec.hidden_size

    @property
    def d_q(self) -> int:
        """Query width n_q x head_dim."""
        return self.spec.num_attention_heads * self.spec.head_dim

    @property
    def attention_heads(self) -> int:
        """Query heads n_q."""
        return self.spec.num_attention_heads

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts: all but the first ``first_k_dense_replace`` of an MoE model, 0 when dense."""
        s = self.spec
        return s.num_hidden_layers - s.first_k_dense_replace if s.is_moe else 0

    @property
    def kv_layers(self) -> int:
        """Layers that keep a full KV cache (all of them unless the model is hybrid or sliding-window)."""
        return self.spec.kv_layers or self.spec.num_hidden_layers

    @property
    def kv_heads(self) -> int:
        """KV heads n_kv."""
        return self.spec.num_key_value_heads

    # -- parameters -----------------------------------------------------------------------------------
    @cached_property
    def _per_layer(self) -> dict[str, float]:
        s = self.spec
        d, h = s.hidden_size, s.head_dim
        attn = d * self.d_q + 2 * d * s.num_key_value_heads * h + self.d_q * d
        mats = 3 if s.gated_mlp else 2
        dense_mlp = mats * d * s.intermediate_size
        expert = mats * d * (s.moe_intermediate_size or s.intermediate_size)
        return {"attn": attn, "dense_mlp": dense_mlp, "expert": expert, "norms": 2 * d}

    @cached_property
    def embedding_params(self) -> float:
        """Input embedding plus LM head (counted once when tied)."""
        s = self.spec
        return s.vocab_size * s.hidden_size * (1 if s.tie_word_embeddings else 2)

    @cached_property
    def block_params_total(self) -> float:
        """Parameters in the transformer blocks (all experts), computed from the config."""
        s, p = self.spec, self._per_layer
        if not s.is_moe:
            return s.num_hidden_layers * (p["attn"] + p["dense_mlp"] + p["norms"])
        assert s.num_experts is not None
        moe = p["expert"] * (s.num_experts + s.num_shared_experts) + s.hidden_size * s.num_experts
        dense = s.num_hidden_layers * (p["attn"] + p["norms"]) + s.first_k_dense_replace * p["dense_mlp"]
        return dense + self.moe_layers * moe

    @cached_property
    def params_total(self) -> float:
        """Total parameters. Uses the catalog's published count when ``params_method`` says so (MLA models,
        whose attention this module does not decompose), else the config-derived count."""
        if self.spec.params_method == "published" and self.spec.params_total_b:
            return self.spec.params_total_b * 1e9
        return self.block_params_total + self.embedding_params + self.spec.hidden_size

    @cached_property
    def params_active(self) -> float:
        """Parameters touched per token (MoE: shared + top-k experts)."""
        s = self.spec
        if s.params_method == "published" and s.params_active_b:
            return s.params_active_b * 1e9
        if not s.is_moe:
            return self.params_total
        assert s.experts_per_token is not None and s.num_experts is not None
        idle = self._per_layer["expert"] * (s.num_experts - s.experts_per_token)
        return self.params_total - self.moe_layers * idle

    @cached_property
    def matmul_params_active(self) -> float:
        """Active parameters of the block matmuls (no embedding, no LM head)."""
        return max(self.params_active - self.embedding_params - self.spec.hidden_size, 0.0)

    # -- bytes ----------------------------------------------------------------------------------------
    @cached_property
    def weight_bytes(self) -> float:
        """Bytes of all weights at ``weight_dtype`` (embeddings and LM head at 16 bits)."""
        blocks = self.params_total - self.embedding_params - self.spec.hidden_size
        return blocks * WEIGHT_BYTES[self.weight_dtype] + (self.embedding_params + self.spec.hidden_size) * EMBED_BYTES

    @cached_property
    def expert_bytes(self) -> float:
        """Bytes of one routed expert in one layer (0 for dense models)."""
        return self._per_layer["expert"] * WEIGHT_BYTES[self.weight_dtype] if self.spec.is_moe else 0.0

    def decode_weight_bytes(self, tokens: ArrayLike) -> ArrayLike:
        """Weight bytes read by one decode step over ``tokens`` sequences. MoE: each layer reads
        ``E * (1 - (1 - k/E)**T)`` distinct experts (DESIGN §2), so reads approach the whole model at large
        batch; dense models read everything."""
        s = self.spec
        if not s.is_moe:
            return self.weight_bytes
        assert s.num_experts is not None and s.experts_per_token is not None
        e, k = s.num_experts, s.experts_per_token
        touched = e * (1.0 - (1.0 - k / e) ** np.maximum(tokens, 1.0))
        return self.weight_bytes - self.moe_layers * (e - touched) * self.expert_bytes

    @cached_property
    def kv_bytes_per_token(self) -> float:
        """KV cache bytes per token for the whole model: ``2 * L * n_kv * head_dim * b`` (MLA: latent
        ``(kv_lora_rank + qk_rope_head_dim) * L * b``)."""
        s = self.spec
        b = KV_BYTES[self.kv_dtype]
        if s.kv_lora_rank:
            return self.kv_layers * (s.kv_lora_rank + (s.qk_rope_head_dim or 0)) * b
        return 2 * self.kv_layers * s.num_key_value_heads * s.head_dim * b

    def kv_shards(self, tp: int) -> int:
        """How many ways TP splits the KV cache: ``min(tp, n_kv)``; MLA latents are replicated (1)."""
        if self.spec.kv_lora_rank:
            return 1
        return max(1, min(tp, self.spec.num_key_value_heads))

    # -- FLOPs ----------------------------------------------------------------------------------------
    def prefill_flops(self, prompt_tokens: ArrayLike, batch: ArrayLike = 1.0) -> ArrayLike:
        """FLOPs of prefilling ``batch`` prompts of ``prompt_tokens`` tokens each (causal half counted)."""
        s = prompt_tokens
        lm_head = 2.0 * self.spec.vocab_size * self.spec.hidden_size
        per_prompt = 2.0 * self.matmul_params_active * s + 2.0 * self.kv_layers * self.d_q * s * s + lm_head
        return batch * per_prompt

    def decode_flops(self, batch: ArrayLike, context_tokens_sum: ArrayLike) -> ArrayLike:
        """FLOPs of one decode step for ``batch`` sequences holding ``context_tokens_sum`` tokens in total."""
        lm_head = 2.0 * self.spec.vocab_size * self.spec.hidden_size
        return (
            batch * (2.0 * self.matmul_params_active + lm_head) + 4.0 * self.kv_layers * self.d_q * context_tokens_sum
        )
