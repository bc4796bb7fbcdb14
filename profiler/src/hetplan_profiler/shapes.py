"""Model shapes the GEMM and attention benchmarks use: one layer's weight matrices and attention heads.

The profiler needs no model catalog: ``hetplan profile --model M`` hands it the shapes of hetplan's catalog model
M, and ``hetplan-profile`` takes ``--model NAME`` from the small built-in set :data:`BUILTIN` (figures as in each
model's Hugging Face ``config.json``; a test checks them against hetplan's catalog) with any field overridden or
given by flags (``--hidden-size``, ``--heads``, ...). The shapes used are written into the profile
(``model_shapes``), so the file says what it measured.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from hetplan_profiler.errors import ProfilerError


@dataclass(frozen=True)
class ModelShape:
    """What the benchmarks need of a decoder-only transformer (names as in Hugging Face ``config.json``).

    ``ffn_size`` is the width of the MLP whose GEMMs are timed: ``intermediate_size`` for a dense model, an
    expert's (``moe_intermediate_size``) for a mixture of experts. ``gated_mlp``: gate and up projections fused
    (SwiGLU), so the up GEMM is ``2 * ffn_size`` wide."""

    name: str
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    ffn_size: int
    gated_mlp: bool = True

    def __post_init__(self) -> None:
        for field in ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "ffn_size"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ProfilerError(
                    f"model shape {self.name!r}: {field} must be a positive integer, got {value!r}",
                    fix="pass the value from the model's config.json",
                )
        if self.num_attention_heads % self.num_key_value_heads:
            raise ProfilerError(
                f"model shape {self.name!r}: {self.num_attention_heads} attention heads are not a multiple of "
                f"{self.num_key_value_heads} KV heads",
                fix="check num_attention_heads and num_key_value_heads",
            )

    def as_dict(self) -> dict[str, Any]:
        """The ``model_shapes`` block of the profile file."""
        return asdict(self)


def _s(name: str, d: int, heads: int, kv: int, ff: int, head_dim: int = 128, gated: bool = True) -> ModelShape:
    return ModelShape(name, d, heads, kv, head_dim, ff, gated)


BUILTIN: dict[str, ModelShape] = {
    s.name: s
    for s in (
        _s("Llama-3-8B", 4096, 32, 8, 14336),
        _s("Llama-3-70B", 8192, 64, 8, 28672),
        _s("Llama-3.1-405B", 16384, 128, 8, 53248),
        _s("Mistral-7B-v0.1", 4096, 32, 8, 14336),
        _s("Mixtral-8x7B-v0.1", 4096, 32, 8, 14336),
        _s("Qwen2.5-7B", 3584, 28, 4, 18944),
        _s("Qwen2.5-72B", 8192, 64, 8, 29568),
    )
}
DEFAULT_MODEL = "Llama-3-8B"


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def builtin_shape(name: str) -> ModelShape | None:
    """The built-in shape set named ``name`` (case, ``-``, ``.`` and ``_`` ignored), or ``None``."""
    wanted = _norm(name)
    return next((s for key, s in BUILTIN.items() if _norm(key) == wanted), None)


def resolve_shape(name: str | None, **overrides: Any) -> ModelShape:
    """The shapes for ``--model name`` with the given fields replaced (``None`` values are ignored).

    A built-in name starts from its figures; any other name needs every field
    (``hidden_size``, ``num_attention_heads``, ``num_key_value_heads``, ``head_dim``, ``ffn_size``).

    Raises:
        ProfilerError: an unknown name without every field, or a bad value.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    base = builtin_shape(name or DEFAULT_MODEL)
    if base is not None:
        return replace(base, **given) if given else base
    needed = ("hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "ffn_size")
    missing = [k for k in needed if k not in given]
    if missing:
        flags = {"num_attention_heads": "heads", "num_key_value_heads": "kv-heads"}
        raise ProfilerError(
            f"--model {name!r} is not a built-in shape set and {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not given",
            f"built-in: {', '.join(BUILTIN)}",
            "pick a built-in --model, or give "
            + " ".join(f"--{flags.get(k, k.replace('_', '-'))} N" for k in missing)
            + " (from the model's config.json)",
        )
    return ModelShape(name=str(name), **given)


def weight_shapes(spec: ModelShape, divisor: int = 1) -> list[tuple[str, int, int]]:
    """(name, N, K) of one layer's GEMMs (QKV, attention output, gate+up, down) with TP 1, each dimension divided
    by ``divisor`` (small CPU runs) and kept a multiple of 16."""

    def cut(x: int) -> int:
        return max(16, x // divisor // 16 * 16)

    d, h = spec.hidden_size, spec.head_dim
    q, kv = spec.num_attention_heads * h, spec.num_key_value_heads * h
    ff = spec.ffn_size
    up = 2 * ff if spec.gated_mlp else ff
    return [
        ("qkv", cut(q + 2 * kv), cut(d)),
        ("o", cut(d), cut(q)),
        ("gate_up", cut(up), cut(d)),
        ("down", cut(d), cut(ff)),
    ]
