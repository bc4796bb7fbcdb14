"""The weight dtypes a plan searches, and the quality label a quantized plan carries.

``weight_dtype: auto`` (``--weight-dtype auto``, the default) plans the model's own dtype: a buyer must not deploy a
quantized model by default. ``weight_dtype: auto-quantized`` opts into quantized plans: the model's own dtype and
fp8 weights on the candidate GPUs with fp8 tensor cores (the catalog's ``fp8_dense_tflops``; vLLM serves fp8
checkpoints and quantizes 16-bit ones to fp8 with ``--quantization fp8`` on them), the cheaper plan of the chosen
strategy kept; the plan lists every dtype it tried under ``dtype_search``. A pinned ``--weight-dtype`` plans that
dtype only. Whenever the plan's weights or KV cache are not the model's own dtype, the plan carries
``quality_note`` (shown in the table and the report): a quantized model is a different model, whose accuracy the
user must check.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.catalog.schemas import GpuSpec, ModelSpec

AUTO = "auto"
"""The model's own weight dtype (the default)."""
AUTO_QUANTIZED = "auto-quantized"
"""The model's own weight dtype and fp8 on GPUs with fp8 tensor cores, the cheaper plan kept (an opt-in)."""
AUTOS = (AUTO, AUTO_QUANTIZED)
"""The weight-dtype values the planner resolves itself."""
MODEL_DTYPE = "bf16"
"""The dtype a catalog model is served in when nothing says otherwise (the catalog's models ship bf16 weights)."""


def model_dtype(spec: ModelSpec) -> str:
    """The model's own weight dtype (``torch_dtype`` of its config when the catalog records one, else bf16)."""
    raw = str(getattr(spec, "torch_dtype", "") or "").lower()
    return {"bfloat16": "bf16", "float16": "fp16", "bf16": "bf16", "fp16": "fp16"}.get(raw, MODEL_DTYPE)


def has_fp8_cores(gpu: GpuSpec) -> bool:
    """True when the catalog lists fp8 tensor-core TFLOPS for ``gpu`` (Hopper, Ada, Blackwell, MI300, Gaudi)."""
    return gpu.fp8_dense_tflops is not None


def weight_candidates(spec: ModelSpec, pinned: str) -> list[str]:
    """Weight dtypes to plan: ``pinned`` alone; for ``auto`` the model's dtype; for ``auto-quantized`` the model's
    dtype then fp8."""
    if pinned not in AUTOS:
        return [pinned]
    own = model_dtype(spec)
    return [own] if own == "fp8" or pinned == AUTO else [own, "fp8"]


def quality_note(spec: ModelSpec, weight_dtype: str, kv_dtype: str) -> str | None:
    """The accuracy note of a plan whose weights or KV cache differ from the model's own dtype (None otherwise)."""
    own = model_dtype(spec)
    changed = []
    if weight_dtype != own:
        changed.append(f"{weight_dtype} weights")
    if kv_dtype not in (own, "bf16", "fp16"):
        changed.append(f"an {kv_dtype} KV cache")
    if not changed:
        return None
    return (
        f"quality change: {' and '.join(changed)} instead of the model's {own}. Quantization changes the model's "
        "outputs; check accuracy on your own evaluation set (for example lm-evaluation-harness on the tasks you "
        "serve) with the checkpoint you deploy before relying on this plan"
    )


__all__ = [
    "AUTO",
    "AUTOS",
    "AUTO_QUANTIZED",
    "MODEL_DTYPE",
    "has_fp8_cores",
    "model_dtype",
    "quality_note",
    "weight_candidates",
]
