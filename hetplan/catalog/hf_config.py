"""A :class:`~hetplan.catalog.schemas.ModelSpec` from a Hugging Face ``config.json`` (``--model path/config.json``).

The config is read into :class:`HfConfig`, a typed view of the keys hetplan uses (each key a field, unknown keys
ignored), so the mapping below reads attributes; its values stay untyped (``Any``) because configs in the wild
write numbers as text or null, and the conversion errors are worded here.

Source: the key names of Hugging Face ``transformers`` configs (Llama, Mistral, Mixtral, Qwen, DeepSeek-V2/V3,
OPT, GPT-2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetplan.catalog.files import format_validation
from hetplan.catalog.schemas import ModelSpec
from hetplan.errors import InputError
from hetplan.input_checks import load_json, read_text_input


class HfConfig(BaseModel):
    """The keys of a Hugging Face ``config.json`` that :func:`model_from_hf_config` reads; each is None when the
    config lacks it. Values are kept as written (numbers as text are converted, and refused, later)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    name_or_path: Any = Field("", alias="_name_or_path")
    architectures: Any = None
    hidden_size: Any = None
    d_model: Any = None
    n_embd: Any = None
    num_attention_heads: Any = None
    n_head: Any = None
    num_hidden_layers: Any = None
    n_layer: Any = None
    num_key_value_heads: Any = None
    head_dim: Any = None
    intermediate_size: Any = None
    ffn_dim: Any = None
    n_inner: Any = None
    vocab_size: Any = None
    max_position_embeddings: Any = None
    n_positions: Any = None
    tie_word_embeddings: Any = False
    hidden_act: Any = "silu"
    num_local_experts: Any = None
    n_routed_experts: Any = None
    num_experts: Any = None
    num_experts_per_tok: Any = None
    moe_intermediate_size: Any = None
    n_shared_experts: Any = None
    first_k_dense_replace: Any = None
    kv_lora_rank: Any = None
    qk_rope_head_dim: Any = None
    #: ``ffn_dim`` is present (OPT): its MLP is not gated.
    has_ffn_dim: bool = False


def model_from_hf_config(path: Path) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json`` (file or folder holding one).

    Reads ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``
    (default: attention heads), ``head_dim`` (default hidden/heads), ``intermediate_size`` (or OPT's
    ``ffn_dim``), ``vocab_size``, ``max_position_embeddings``, ``tie_word_embeddings``; MoE keys
    ``num_local_experts``/``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
    ``n_shared_experts``, ``first_k_dense_replace``; MLA keys ``kv_lora_rank``, ``qk_rope_head_dim``.

    Raises:
        InputError: the file is missing, not JSON, or lacks a required key (named in the message).
    """
    file = path / "config.json" if path.is_dir() else path
    try:  # a regular file (never a FIFO or /dev/zero), nesting and numbers checked (hetplan.input_checks.load_json)
        raw = load_json(read_text_input(file, "model config"), f"model config {file}")
    except InputError as exc:
        raise InputError(
            exc.what, exc.why, exc.fix if "JSON" not in exc.what else "pass a Hugging Face config.json"
        ) from None
    if not isinstance(raw, dict):
        raise InputError(f"model config {file} is not a JSON object", fix="pass a Hugging Face config.json")
    cfg = HfConfig.model_validate({**raw, "has_ffn_dim": "ffn_dim" in raw})

    def need(*named: tuple[str, Any]) -> Any:
        for _, value in named:
            if value is not None:
                return value
        raise InputError(
            f"model config {file} lacks {' or '.join(key for key, _ in named)}",
            fix="pass a decoder-only transformer's config.json",
        )

    try:
        hidden = int(need(("hidden_size", cfg.hidden_size), ("d_model", cfg.d_model), ("n_embd", cfg.n_embd)))
        heads = int(need(("num_attention_heads", cfg.num_attention_heads), ("n_head", cfg.n_head)))
        experts = cfg.num_local_experts or cfg.n_routed_experts or cfg.num_experts
        fields: dict[str, Any] = {
            "name": _config_model_name(cfg, file),
            "hf_repo": cfg.name_or_path,
            "architecture": (cfg.architectures or [""])[0],
            "hidden_size": hidden,
            "num_hidden_layers": int(need(("num_hidden_layers", cfg.num_hidden_layers), ("n_layer", cfg.n_layer))),
            "num_attention_heads": heads,
            "num_key_value_heads": int(_or(cfg.num_key_value_heads, heads)),
            "head_dim": int(_or(cfg.head_dim, hidden // heads)),
            "intermediate_size": int(
                need(("intermediate_size", cfg.intermediate_size), ("ffn_dim", cfg.ffn_dim), ("n_inner", cfg.n_inner))
            ),  # fmt: skip
            "vocab_size": int(need(("vocab_size", cfg.vocab_size))),
            "max_position_embeddings": int(cfg.max_position_embeddings or cfg.n_positions or 4096),
            "tie_word_embeddings": bool(cfg.tie_word_embeddings),
            "gated_mlp": not cfg.has_ffn_dim and cfg.hidden_act != "relu",
            "source": str(file),
            "params_method": "computed from config",
        }
        if experts:
            fields["num_experts"] = int(experts)
            fields["experts_per_token"] = int(need(("num_experts_per_tok", cfg.num_experts_per_tok)))
            if cfg.moe_intermediate_size:
                fields["moe_intermediate_size"] = int(cfg.moe_intermediate_size)
            fields["num_shared_experts"] = int(cfg.n_shared_experts or 0)
            fields["first_k_dense_replace"] = int(cfg.first_k_dense_replace or 0)
        if cfg.kv_lora_rank:
            fields["kv_lora_rank"] = int(cfg.kv_lora_rank)
            fields["qk_rope_head_dim"] = int(cfg.qk_rope_head_dim or 64)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
        raise InputError(
            f"model config {file} has a value hetplan cannot use",
            f"{type(exc).__name__}: {exc}",
            "check the head counts and sizes: positive integers",
        ) from None
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise InputError(
            f"model config {file} is not usable", format_validation(exc), "check the config's head counts"
        ) from None


def _config_model_name(cfg: HfConfig, file: Path) -> str:
    """A short name for a model read from ``file``: the config's ``_name_or_path`` (a Hugging Face repo, or the last
    part of a local path), else the folder holding ``config.json``, else the file's stem. The full path stays in
    the spec's ``source``."""
    named = str(cfg.name_or_path or "").strip()
    if named:
        local = named.startswith(("/", "./", "../", "~")) or "\\" in named
        return (Path(named.rstrip("/\\")).name or named) if local else named
    if file.name == "config.json" and file.resolve().parent.name:
        return file.resolve().parent.name
    return file.stem


def _or(value: Any, default: Any) -> Any:
    """``value`` unless absent or null (a present 0 is kept, so validation can reject it)."""
    return default if value is None else value


__all__ = ["HfConfig", "model_from_hf_config"]
