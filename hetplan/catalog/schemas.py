"""Schemas of the catalog YAML files (GPUs, prices, models) and of user price files.

Records are frozen pydantic models with unknown fields forbidden: they are read from files, and they are
immutable afterwards, so the domain code uses them directly instead of copying every field into a twin
dataclass. Every catalog file carries ``schema_version``, ``source`` and ``as_of``.

Source: hetplan's own reconstruction; fields follow ``shared/data/*.csv`` with units in the names.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


MAX_MEASURED_TFLOPS = 1e5
"""Upper bound on a measured GEMM figure, TFLOP/s (as pool files' ``measured_tflops``)."""
# Documented bounds of catalog figures (catalogs/README.md): far above any device or model (the largest GPUs have
# 288 GiB, 8e3 GB/s, 5e3 dense TFLOP/s; the largest models 1e5 hidden, 1e3 layers, 1e7 tokens of context), so only
# corrupt or unit-confused figures (1e308 TFLOPS, a memory in bytes) are refused, before any arithmetic.
MAX_GPU_MEMORY_GIB = 1e4
MAX_GB_PER_S = 1e6
MAX_USD_PER_HOUR = 1e5
MAX_MODEL_WIDTH = 2**20
MAX_MODEL_LAYERS = 10_000
MAX_CONTEXT_TOKENS = 10**8


class GpuMeasured(_Record):
    """What ``hetplan profile`` measured on one device (the profile file's ``measured`` block, see
    ``hetplan/catalog/profile.py``); the full per-shape tables stay in the profile file. When a :class:`GpuSpec`
    carries this block the performance model uses it in place of the datasheet peaks and the efficiency priors
    (:func:`hetplan.perf.measured.measured_efficiency`).

    ``gemm_tflops`` maps a dtype (``bf16``, ``fp16``, ``fp8``, ``tf32``, ``fp32``) to the best median TFLOP/s over
    the prefill-like GEMM shapes; ``memory_read_gb_per_s`` is a read-heavy kernel's bandwidth (what decode does)
    and ``memory_copy_gb_per_s`` a device copy's (bytes read + written per second), both GB/s = 1e9 bytes/s;
    ``allreduce_bus_gb_per_s`` / ``allreduce_latency_s`` the NCCL all-reduce bus bandwidth (large messages) and
    latency (smallest message) over ``allreduce_gpus`` GPUs, when measured. ``device_kind`` ``cpu`` marks a
    profile taken on a CPU (a test of the tool, not a GPU measurement)."""

    device_kind: Literal["cuda", "cpu"]
    device_name: str
    gemm_tflops: dict[str, float] = Field(min_length=1)
    # bounds: far above any device (the fastest GPUs read ~8e3 GB/s and reach ~5e3 dense TFLOP/s), so only
    # corrupt or unit-confused figures are refused (pool files cap TFLOPS at 1e5 likewise)
    memory_read_gb_per_s: float = Field(gt=0, le=1e6)
    memory_copy_gb_per_s: float = Field(gt=0, le=1e6)
    host_to_device_gb_per_s: float | None = Field(default=None, gt=0, le=1e5)
    allreduce_bus_gb_per_s: float | None = Field(default=None, gt=0, le=1e5)
    allreduce_latency_s: float | None = Field(default=None, gt=0, le=10)
    allreduce_gpus: int | None = Field(default=None, ge=2)
    profiled_at: str = ""
    profile_source: str = ""

    def __hash__(self) -> int:  # frozen records are hashable; the dict field needs a stable stand-in
        return hash(self.model_dump_json())

    @model_validator(mode="after")
    def _positive(self) -> GpuMeasured:
        for dtype, value in self.gemm_tflops.items():
            if not 0 < value <= MAX_MEASURED_TFLOPS:
                raise ValueError(f"gemm_tflops.{dtype} must be > 0 and <= {MAX_MEASURED_TFLOPS:g}, got {value}")
        return self

    def tflops(self, dtype: str) -> float | None:
        """Measured TFLOP/s for the compute dtype ``dtype`` with the datasheet's fallbacks: fp8/int8/int4 fall
        back to bf16 then fp16 (as :meth:`GpuSpec.dense_tflops`), bf16 <-> fp16; ``None`` when nothing fits."""
        chain = {
            "bf16": ("bf16", "fp16"),
            "fp16": ("fp16", "bf16"),
            "fp8": ("fp8", "bf16", "fp16"),
            "int8": ("int8", "bf16", "fp16"),
            "int4": ("bf16", "fp16"),
        }.get(dtype, (dtype,))
        for name in chain:
            if name in self.gemm_tflops:
                return float(self.gemm_tflops[name])
        return None


class GpuSpec(_Record):
    """One accelerator. Compute figures are dense (never sparse) peak TFLOPS per dtype; ``hbm_gib`` is the
    device memory in GiB (HBM or GDDR), ``hbm_gb_per_s`` its bandwidth in GB/s (1e9 bytes/s),
    ``interconnect_gb_per_s`` the aggregate bidirectional GPU-to-GPU link figure of the datasheet and
    ``network_gbit_per_s`` the scale-out NIC bandwidth per GPU (an assumption unless you set it)."""

    name: str
    aliases: tuple[str, ...] = ()
    vendor: str = ""
    form_factor: str = ""
    arch: str = ""
    bf16_dense_tflops: float | None = Field(default=None, gt=0, le=MAX_MEASURED_TFLOPS)
    fp16_dense_tflops: float | None = Field(default=None, gt=0, le=MAX_MEASURED_TFLOPS)
    fp8_dense_tflops: float | None = Field(default=None, gt=0, le=MAX_MEASURED_TFLOPS)
    int8_dense_tops: float | None = Field(default=None, gt=0, le=MAX_MEASURED_TFLOPS)
    fp4_dense_tflops: float | None = Field(default=None, gt=0, le=MAX_MEASURED_TFLOPS)
    fp16_dense_tflops_estimate: float | None = Field(default=None, gt=0, le=MAX_MEASURED_TFLOPS)
    estimate_note: str | None = None
    hbm_gib: float = Field(gt=0, le=MAX_GPU_MEMORY_GIB)
    memory_type: str = ""
    hbm_gb_per_s: float = Field(gt=0, le=MAX_GB_PER_S)
    interconnect: str = ""
    interconnect_gb_per_s: float = Field(gt=0, le=MAX_GB_PER_S)
    network_gbit_per_s: float = Field(gt=0, le=MAX_GB_PER_S)
    tdp_w: float | None = Field(default=None, ge=0, le=1e5)
    notes: str = ""
    source_url: str | None = None
    crosscheck_url: str | None = None
    measured: GpuMeasured | None = None
    # memory the CUDA runtime reports as total (what vLLM logs as total_gpu_memory), GiB; None: hbm_gib less the
    # driver's reserve (hetplan.perf.engines.visible_memory_gib)
    usable_memory_gib: float | None = Field(default=None, gt=0, le=MAX_GPU_MEMORY_GIB)
    # GPUs in one NVLink scale-up domain (8 in an HGX board, 72 in an NVL72 rack): the largest TP x EP group
    scale_up_gpus: int = Field(default=8, ge=1, le=100_000)

    def dense_tflops(self, dtype: str) -> tuple[float, bool]:
        """Peak dense TFLOPS for ``dtype`` (``bf16``, ``fp16``, ``fp8``, ``int8``) and whether it is an
        unverified estimate. Falls back: bf16 -> fp16 where only one 16-bit figure is listed (Ampere and newer run
        both at the same rate), fp8/int8 -> the 16-bit rate when the part has no 8-bit tensor cores (weights are
        upcast). Volta, Turing and Pascal parts have no bf16 at all.

        Raises:
            KeyError: the GPU has no figure for ``dtype`` (no bf16 before Ampere; nothing published or estimated).
        """
        no_bf16 = self.bf16_dense_tflops is None and self.arch in ("Volta", "Turing", "Pascal")
        published = {
            "bf16": None if no_bf16 else self.bf16_dense_tflops or self.fp16_dense_tflops,
            "fp16": self.fp16_dense_tflops or self.bf16_dense_tflops,
            "fp8": self.fp8_dense_tflops,
            "int8": self.int8_dense_tops,
            "fp4": self.fp4_dense_tflops,
        }
        value = published.get(dtype)
        if value is None and dtype == "fp4":
            value = self.fp8_dense_tflops
        if value is None and dtype in ("fp4", "fp8", "int8", "int4"):
            value = self.bf16_dense_tflops or self.fp16_dense_tflops
        if value is None and dtype == "int4":
            value = published["fp16"]
        if value is not None:
            return float(value), False
        if no_bf16 and dtype == "bf16":
            raise KeyError(f"{self.name} ({self.arch}) has no bf16 tensor cores")
        if self.fp16_dense_tflops_estimate is not None:
            return float(self.fp16_dense_tflops_estimate), True
        raise KeyError(self.name)


class GpuCatalog(_Record):
    """The GPU catalog file (``catalogs/gpus.yaml``)."""

    schema_version: Literal[1]
    kind: Literal["gpus"]
    source: str
    as_of: str
    gpus: tuple[GpuSpec, ...]


class PriceEntry(_Record):
    """One purchasable offer: a cloud instance type with ``gpus_per_instance`` GPUs, priced per instance-hour on
    demand and spot (``None`` = not offered); the $/GPU-hour fields are the same prices divided by the GPU count.
    ``scale_up_domain_gpus`` is the most GPUs one TP group may span (default: the instance's own GPUs; larger only
    for rack-scale NVLink offers, where a TP group may span instances)."""

    gpu: str
    in_gpu_catalog: bool = True
    cloud: str
    instance_type: str = ""
    gpus_per_instance: int = Field(default=1, ge=1, le=100_000)
    region: str = ""
    on_demand_usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=MAX_USD_PER_HOUR)
    spot_usd_per_gpu_hour: float | None = Field(default=None, gt=0, le=MAX_USD_PER_HOUR)
    on_demand_usd_per_instance_hour: float | None = Field(default=None, gt=0, le=MAX_USD_PER_HOUR)
    spot_usd_per_instance_hour: float | None = Field(default=None, gt=0, le=MAX_USD_PER_HOUR)
    scale_up_domain_gpus: int | None = Field(default=None, ge=1, le=100_000)
    includes_host: bool = True
    unreliable: bool = False
    listed_gpu: str | None = None
    notes: str | None = None
    source: str = ""
    as_of: str | None = None  # the row's snapshot date when it differs from the file's ``as_of``

    @model_validator(mode="after")
    def _has_a_price(self) -> PriceEntry:
        if self.on_demand_usd_per_gpu_hour is None and self.spot_usd_per_gpu_hour is None:
            raise ValueError(f"price row for {self.gpu} on {self.cloud} has neither on-demand nor spot price")
        return self

    def usd_per_instance_hour(self, spot: bool = False) -> float | None:
        """$/instance-hour on demand (or ``spot``): the listed instance price, else $/GPU-hour x GPUs."""
        listed = self.spot_usd_per_instance_hour if spot else self.on_demand_usd_per_instance_hour
        if listed is not None:
            return listed
        per_gpu = self.spot_usd_per_gpu_hour if spot else self.on_demand_usd_per_gpu_hour
        return None if per_gpu is None else per_gpu * self.gpus_per_instance


class PriceCatalog(_Record):
    """The price catalog file (``catalogs/prices.yaml``)."""

    schema_version: Literal[1]
    kind: Literal["prices"]
    source: str
    as_of: str
    currency: Literal["USD"] = "USD"
    prices: tuple[PriceEntry, ...]


class UserOffer(_Record):
    """One offer in a user price file (``offers:``): a rented instance type (``usd_per_instance_hour``) or, with
    ``provider: owned``, GPUs the user owns (``count`` nodes of ``gpus_per_instance`` GPUs at an amortised
    ``usd_per_gpu_hour``, which may be 0). Field checks are made by :func:`hetplan.catalog.offers.user_offers`,
    which names the row."""

    provider: str = Field(description="Cloud name (`aws`, `azure`, ...) or `owned` for GPUs you own.")
    gpu: str = Field(description="GPU type, a catalog name or alias (`hetplan catalog gpus`).")
    instance_type: str = Field(
        default="",
        description="The provider's instance name; required for rented offers (owned nodes default to "
        "`owned-<GPU>-<k>gpu`).",
    )
    region: str = Field(default="", description="Region; a deployment's instances share one provider and region.")
    gpus_per_instance: StrictInt = Field(default=1, description="GPUs in one instance or owned node (>= 1).")
    usd_per_instance_hour: StrictFloat | StrictInt | None = Field(
        default=None, description="On-demand $/instance-hour of a rented offer (> 0)."
    )
    usd_per_gpu_hour: StrictFloat | StrictInt | None = Field(
        default=None, description="$/GPU-hour instead of per instance; for owned nodes the amortised price (may be 0)."
    )
    spot_usd_per_instance_hour: StrictFloat | StrictInt | None = Field(
        default=None, description="Spot $/instance-hour, used with `spot: true` / `--spot`."
    )
    count: StrictInt | None = Field(
        default=None, description="Instances available; required for owned nodes (the nodes you own), else unlimited."
    )
    scale_up_domain_gpus: StrictInt | None = Field(
        default=None, description="GPUs one TP group may span (NVLink domain); default: the instance's GPUs."
    )
    notes: str | None = Field(default=None, description="Free text, kept with the offer.")


class UserPriceFile(_Record):
    """A user's own prices: ``usd_per_gpu_hour`` maps GPU name -> $/GPU-hour and overrides the catalog; ``offers``
    adds instance offers, rented or owned (:class:`UserOffer`, docs/purchases.md).

    Example::

        schema_version: 1
        kind: prices
        source: "our 2026 reserved-instance contract"
        as_of: "2026-11-01"
        illustrative: false
        usd_per_gpu_hour: {H800: 2.10, A800: 1.30, H20: 0.95}
    """

    schema_version: Literal[1] = Field(description="Always 1.")
    kind: Literal["prices"] = Field(description="Always `prices`.")
    source: str = Field(description="Where the prices come from (shown next to every price the plan uses).")
    as_of: str = Field(description="The date the prices hold, e.g. `2026-11-01`.")
    illustrative: bool = Field(default=False, description="Mark the prices as examples, not quotes (plans say so).")
    notes: str | None = Field(default=None, description="Free text.")
    usd_per_gpu_hour: dict[str, StrictFloat | StrictInt] = Field(
        default_factory=dict,
        description="GPU name -> $/GPU-hour (> 0). Replaces the catalog's offers of that GPU; for a GPU in the "
        "inventory it is the owned GPUs' amortised price, and the cloud's offers may still be rented beside them.",
    )
    offers: tuple[UserOffer, ...] = Field(
        default=(), description="Instance offers, rented or `provider: owned` (one row each; docs/purchases.md)."
    )

    @model_validator(mode="after")
    def _positive(self) -> UserPriceFile:
        if not self.usd_per_gpu_hour and not self.offers:
            raise ValueError("a price file needs usd_per_gpu_hour or offers")
        for name, value in self.usd_per_gpu_hour.items():
            if not 0 < value <= MAX_USD_PER_HOUR:
                raise ValueError(f"usd_per_gpu_hour.{name} must be > 0 and <= {MAX_USD_PER_HOUR:g}, got {value}")
        return self


class ModelSpec(_Record):
    """Architecture facts of a decoder-only transformer, named as in Hugging Face ``config.json``.

    MoE: ``num_experts`` routed experts of width ``moe_intermediate_size`` (defaults to
    ``intermediate_size``), ``experts_per_token`` active, ``num_shared_experts`` always active, and the first
    ``first_k_dense_replace`` layers dense. MLA (DeepSeek): ``kv_lora_rank`` + ``qk_rope_head_dim`` elements
    of KV per token per layer instead of ``2 * num_key_value_heads * head_dim``.
    """

    name: str
    hf_repo: str = ""
    architecture: str = ""
    hidden_size: int = Field(gt=0, le=MAX_MODEL_WIDTH)
    num_hidden_layers: int = Field(gt=0, le=MAX_MODEL_LAYERS)
    num_attention_heads: int = Field(gt=0, le=MAX_MODEL_WIDTH)
    num_key_value_heads: int = Field(gt=0, le=MAX_MODEL_WIDTH)
    head_dim: int = Field(gt=0, le=MAX_MODEL_WIDTH)
    intermediate_size: int = Field(gt=0, le=MAX_MODEL_WIDTH * 16)
    vocab_size: int = Field(gt=0, le=MAX_CONTEXT_TOKENS)
    max_position_embeddings: int = Field(gt=0, le=MAX_CONTEXT_TOKENS)
    num_experts: int | None = Field(default=None, gt=0, le=MAX_MODEL_WIDTH)
    experts_per_token: int | None = Field(default=None, gt=0, le=MAX_MODEL_WIDTH)
    moe_intermediate_size: int | None = Field(default=None, gt=0, le=MAX_MODEL_WIDTH * 16)
    num_shared_experts: int = Field(default=0, ge=0, le=MAX_MODEL_WIDTH)
    first_k_dense_replace: int = Field(default=0, ge=0, le=MAX_MODEL_LAYERS)
    kv_lora_rank: int | None = Field(default=None, gt=0, le=MAX_MODEL_WIDTH)
    qk_rope_head_dim: int | None = Field(default=None, gt=0, le=MAX_MODEL_WIDTH)
    # layers that keep a full KV cache (hybrid models: full-attention layers only; sliding-window and linear-attention
    # layers keep a bounded state); None: every layer
    kv_layers: int | None = Field(default=None, gt=0, le=MAX_MODEL_LAYERS)
    gated_mlp: bool = True
    tie_word_embeddings: bool = False
    params_total_b: float | None = Field(default=None, gt=0, le=1e5)
    params_active_b: float | None = Field(default=None, gt=0, le=1e5)
    params_method: str = "computed from config"
    notes: str | None = None
    source: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        if (self.num_experts is None) != (self.experts_per_token is None):
            raise ValueError("num_experts and experts_per_token must be given together")
        if self.num_experts is not None and self.experts_per_token is not None:
            if self.experts_per_token > self.num_experts:
                raise ValueError("experts_per_token must be <= num_experts")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("num_attention_heads must be a multiple of num_key_value_heads")
        # more dense layers than layers gave a negative expert count and negative weight memory (exit 0)
        if self.first_k_dense_replace > self.num_hidden_layers:
            raise ValueError(
                f"first_k_dense_replace ({self.first_k_dense_replace}) exceeds num_hidden_layers "
                f"({self.num_hidden_layers})"
            )
        if self.kv_layers is not None and self.kv_layers > self.num_hidden_layers:
            raise ValueError(f"kv_layers ({self.kv_layers}) exceeds num_hidden_layers ({self.num_hidden_layers})")
        return self

    @property
    def is_moe(self) -> bool:
        """True for mixture-of-experts models."""
        return self.num_experts is not None


class ModelCatalog(_Record):
    """The model catalog file (``catalogs/models.yaml``)."""

    schema_version: Literal[1]
    kind: Literal["models"]
    source: str
    as_of: str
    models: tuple[ModelSpec, ...]
