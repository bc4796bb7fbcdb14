"""The deployment rule table: one set of engine rules that the planner applies while enumerating candidates and
that ``hetplan emit`` applies before writing any file, so a plan hetplan prints can be deployed as planned.

Each :class:`Rule` looks at one serving instance (:class:`InstanceShape`, scope ``instance``) or at the prefill
and decode instances of one combo (scope ``pair``) under a :class:`Deployment` (engine, version, KV connector,
block size, ``--max-model-len``, scale-up domain) and returns the reason it is broken, or None. The planner drops
a broken instance option or GPU pair before it reaches the MILP (its reasons appear when nothing is left); emit
turns every finding into a :class:`hetplan.emit.rules.Violation` (exit 1). Adding a rule to :data:`RULES` changes
both (``tests/unit/test_deploy_rules.py`` checks it).

| rule | scope | what it checks |
|---|---|---|
| ``tp-heads`` | instance | TP divides the attention heads, and TP divides the KV heads or is a multiple of them (GQA) |
| ``tp-scale-up`` | instance | a TP group stays inside one scale-up domain (NVLink/PCIe node): TP <= ``scale_up_gpus`` |
| ``kv-block-size`` | instance | the KV block size is one vLLM accepts |
| ``fit`` | instance | weights + activation reserve fit, and the KV cache holds one ``--max-model-len`` sequence |
| ``nixl-tp`` | pair | NixlConnector: decode TP is a multiple of prefill TP (so prefill TP <= decode TP) |
| ``mooncake-tp`` | pair | MooncakeConnector: equal TP on both sides |
| ``kv-layout`` | pair | equal KV block size and KV cache dtype on both sides |

``--max-model-len`` is the planner's: the longest request (prompt + output tokens) of the workload it keeps (after
the context-window rule, :mod:`hetplan.workload.context`); the plan records it under ``scenario.deployment`` and
emit writes it, so every instance the planner kept holds it (rule ``fit``).

Source: the connector rules read vLLM 0.11's NixlConnector (``tp_ratio = divide(decode TP, prefill TP)``: each
decode rank reads from one prefill rank, refused when decode TP is smaller) and MooncakeConnector (one-to-one
ranks); the head rule is vLLM's GQA sharding (KV heads split across ranks, or replicated when TP exceeds them);
block sizes are vLLM's ``--block-size`` choices; the memory rule uses hetplan's memory model
(:class:`hetplan.perf.latency.InstanceModel`). The rules are applied to every vLLM version the plan names (the
default image is 0.11.0); for later versions, which relax some of them, they are conservative. The table is
hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel

VLLM_BLOCK_SIZES = (1, 8, 16, 32, 64, 128)
KV_CONNECTORS = ("NixlConnector", "MooncakeConnector")
CONNECTOR_ALIASES = {"nixl": "NixlConnector", "mooncake": "MooncakeConnector"}
DEFAULT_ENGINE_VERSION = "0.11.0"
DEFAULT_SCALE_UP_GPUS = 8


@dataclass(frozen=True)
class Deployment:
    """What every instance of a plan is deployed with.

    Attributes:
        engine / engine_version: the serving engine (``vllm``) and its version.
        kv_connector: ``NixlConnector`` or ``MooncakeConnector`` (disaggregated combos only).
        block_size_tokens: ``--block-size``.
        max_model_len_tokens: ``--max-model-len``: every instance's KV cache must hold one sequence this long.
        scale_up_gpus: GPUs in one scale-up domain (NVLink or PCIe node); a TP group must stay inside one.
    """

    engine: str = "vllm"
    engine_version: str = DEFAULT_ENGINE_VERSION
    kv_connector: str = "NixlConnector"
    block_size_tokens: int = 16
    max_model_len_tokens: int = 1
    scale_up_gpus: int = DEFAULT_SCALE_UP_GPUS


@dataclass(frozen=True)
class InstanceShape:
    """One serving instance as the rules see it.

    Attributes:
        where: how messages name it (``"combo 0 prefill (H100-SXM, TP 4, PP 1)"`` in emit, ``"H100-SXM TP4"`` in
            the planner); unit: how they name its combo (``"combo 0"``; the planner: the GPU pair).
        model: the model and dtypes; instance: its memory model (``InstanceModel``, None when TP does not divide
            the heads, so no model can be built).
        gpu / tp / pp: where it runs. kv_cache_dtype: the KV dtype it writes. block_size_tokens: its block size.
    """

    where: str
    unit: str
    model: ModelArch
    gpu: str
    tp: int
    pp: int
    kv_cache_dtype: str
    block_size_tokens: int
    instance: InstanceModel | None


@dataclass(frozen=True)
class Finding:
    """A broken rule: its name, what failed, the numbers, and how to fix it."""

    rule: str
    what: str
    why: str
    fix: str


InstanceCheck = Callable[[InstanceShape, Deployment], Finding | None]
PairCheck = Callable[[InstanceShape, InstanceShape, Deployment], Finding | None]


@dataclass(frozen=True)
class Rule:
    """One row of the table: ``instance`` (one serving instance) or ``pair`` (prefill and decode of a combo)
    returns a :class:`Finding` when the rule is broken, None otherwise."""

    name: str
    summary: str
    instance: InstanceCheck | None = None
    pair: PairCheck | None = None

    @property
    def scope(self) -> Literal["instance", "pair"]:
        """``instance`` or ``pair``."""
        return "instance" if self.instance is not None else "pair"


def canonical_connector(name: str) -> str:
    """``nixl`` / ``NixlConnector`` -> ``NixlConnector`` (unknown names are returned as given)."""
    return CONNECTOR_ALIASES.get(name.strip().lower(), name.strip())


# -- instance rules ---------------------------------------------------------------------------------------------


def check_tp_heads(x: InstanceShape, dep: Deployment) -> Finding | None:
    """TP divides the attention heads; with GQA, TP divides the KV heads or is a multiple of them (vLLM shards KV
    heads evenly, or replicates each on TP / n_kv ranks). MLA models replicate their latent KV: no KV-head rule."""
    heads, kv = x.model.attention_heads, x.model.kv_heads
    name = x.model.spec.name
    if heads % x.tp:
        return Finding(
            "tp-heads",
            f"{x.where}: TP {x.tp} does not divide the {heads} attention heads of {name}",
            f"{heads} heads / TP {x.tp} = {heads / x.tp:g}, not a whole number",
            "re-plan with TP degrees that divide the head count (--tp 1,2,4,8 for most models)",
        )
    if not x.model.spec.kv_lora_rank and kv > 0 and kv % x.tp and x.tp % kv:
        return Finding(
            "tp-heads",
            f"{x.where}: TP {x.tp} neither divides nor is a multiple of the {kv} KV heads of {name}",
            f"vLLM splits the {kv} KV heads evenly across TP ranks, or replicates them when TP > {kv}",
            "re-plan with a TP degree that divides the KV heads or is a multiple of them",
        )
    return None


def check_tp_scale_up(x: InstanceShape, dep: Deployment) -> Finding | None:
    """A TP group stays inside one scale-up domain (the all-reduce model assumes the GPUs' NVLink/PCIe links)."""
    if x.tp <= dep.scale_up_gpus:
        return None
    return Finding(
        "tp-scale-up",
        f"{x.where}: TP {x.tp} spans more than one scale-up domain of {dep.scale_up_gpus} GPUs",
        "tensor parallelism all-reduces twice per layer over the GPUs' scale-up links; across nodes it would run "
        "over the network, which the plan's latency model does not assume",
        f"re-plan with TP <= {dep.scale_up_gpus} (use PP to span nodes)",
    )


def check_block_size(x: InstanceShape, dep: Deployment) -> Finding | None:
    """The KV block size is one vLLM accepts."""
    if x.block_size_tokens in VLLM_BLOCK_SIZES:
        return None
    return Finding(
        "kv-block-size",
        f"{x.where}: --block-size {x.block_size_tokens} is not a vLLM block size",
        f"vLLM accepts {', '.join(map(str, VLLM_BLOCK_SIZES))} tokens",
        "plan with perf setting block_size_tokens 16 (vLLM's default)",
    )


def check_fit(x: InstanceShape, dep: Deployment) -> Finding | None:
    """Weights plus the activation reserve fit, and the KV cache holds one ``--max-model-len`` sequence (vLLM
    refuses to start otherwise); hetplan's memory model predicts the KV room."""
    inst = x.instance
    if inst is None:
        return None  # TP does not divide the heads: rule tp-heads reports it
    capacity = inst.kv_capacity_tokens
    need_tokens = dep.max_model_len_tokens
    if capacity >= need_tokens:
        return None
    s = inst.settings
    from hetplan.perf.engines import visible_memory_gib

    visible = visible_memory_gib(inst.gpu)
    return Finding(
        "fit",
        f"{x.where}: {x.model.spec.name} and one {need_tokens}-token sequence do not fit",
        f"weights {inst.weights_gib_per_gpu:.1f} + activations {inst.activation_gib_per_gpu:.1f} "
        f"(max_num_batched_tokens {s.max_num_batched_tokens}, max_num_seqs {s.max_num_seqs}) + non-torch "
        f"{inst.runtime_gib_per_gpu:.1f} GiB per GPU of {visible * s.gpu_memory_utilization:.1f} GiB usable "
        f"({visible:g} GiB x {s.gpu_memory_utilization:g}, {s.engine}) leave KV room for {capacity} tokens, "
        f"fewer than --max-model-len {need_tokens}",
        "raise TP or PP, quantize, or pick a GPU with more memory (or raise gpu_memory_utilization, lower "
        "max_num_batched_tokens or max_num_seqs, or lower max_model_len_tokens)",
    )


# -- pair rules -------------------------------------------------------------------------------------------------


def check_nixl_tp(p: InstanceShape, d: InstanceShape, dep: Deployment) -> Finding | None:
    """NixlConnector: decode TP is a multiple of prefill TP (vLLM 0.11: each decode rank reads one prefill rank's
    KV heads; a smaller or non-multiple decode TP is refused)."""
    if canonical_connector(dep.kv_connector) != "NixlConnector" or d.tp % p.tp == 0:
        return None
    why = f"here {p.tp} > {d.tp}" if p.tp > d.tp else f"here {d.tp} is not a multiple of {p.tp}"
    return Finding(
        "nixl-tp",
        f"{p.unit} pairs prefill TP {p.tp} ({p.gpu}) with decode TP {d.tp} ({d.gpu}) under NixlConnector",
        "NixlConnector moves KV from prefill to decode only when prefill TP <= decode TP and decode TP is a "
        f"multiple of prefill TP; {why}",
        "re-plan so that prefill TP <= decode TP (and divides it) in every combo (hetplan plan applies this rule "
        "itself), or raise the decode TP",
    )


def check_mooncake_tp(p: InstanceShape, d: InstanceShape, dep: Deployment) -> Finding | None:
    """MooncakeConnector: equal TP on both sides."""
    if canonical_connector(dep.kv_connector) != "MooncakeConnector" or p.tp == d.tp:
        return None
    return Finding(
        "mooncake-tp",
        f"{p.unit} pairs prefill TP {p.tp} ({p.gpu}) with decode TP {d.tp} ({d.gpu}) under MooncakeConnector",
        f"MooncakeConnector needs equal TP on both sides; here {p.tp} != {d.tp}",
        "use --kv-connector nixl, or re-plan with a single TP degree (--tp N)",
    )


def check_kv_block_equal(p: InstanceShape, d: InstanceShape, dep: Deployment) -> Finding | None:
    """Equal KV block size on both sides (KV blocks are copied block for block)."""
    if p.block_size_tokens == d.block_size_tokens:
        return None
    return Finding(
        "kv-layout",
        f"{p.unit}: prefill --block-size {p.block_size_tokens} differs from decode --block-size {d.block_size_tokens}",
        "KV blocks are copied block for block from prefill to decode, so both sides need one size",
        "use one block size for both roles",
    )


def check_kv_dtype_equal(p: InstanceShape, d: InstanceShape, dep: Deployment) -> Finding | None:
    """Equal KV cache dtype on both sides (the decode side reads the bytes the prefill side wrote)."""
    if p.kv_cache_dtype == d.kv_cache_dtype:
        return None
    return Finding(
        "kv-layout",
        f"{p.unit}: prefill --kv-cache-dtype {p.kv_cache_dtype} differs from decode --kv-cache-dtype "
        f"{d.kv_cache_dtype}",
        "the decode side reads the KV bytes exactly as the prefill side wrote them",
        "use one KV cache dtype for both roles",
    )


RULES: list[Rule] = [
    Rule("tp-heads", "TP divides the attention heads; GQA: TP and the KV heads divide", instance=check_tp_heads),
    Rule("tp-scale-up", "a TP group stays inside one scale-up domain", instance=check_tp_scale_up),
    Rule("kv-block-size", "a KV block size vLLM accepts", instance=check_block_size),
    Rule("fit", "weights fit and the KV cache holds one --max-model-len sequence", instance=check_fit),
    Rule("nixl-tp", "NixlConnector: decode TP is a multiple of prefill TP", pair=check_nixl_tp),
    Rule("mooncake-tp", "MooncakeConnector: equal TP", pair=check_mooncake_tp),
    Rule("kv-layout", "equal KV block size on both sides", pair=check_kv_block_equal),
    Rule("kv-layout", "equal KV cache dtype on both sides", pair=check_kv_dtype_equal),
]
"""The table (a list, so a deployment can add a rule and both the planner and emit follow)."""


def instance_findings(x: InstanceShape, dep: Deployment) -> list[Finding]:
    """Every broken instance rule of ``x``, in table order."""
    found = (rule.instance(x, dep) for rule in RULES if rule.instance is not None)
    return [f for f in found if f is not None]


def pair_findings(p: InstanceShape, d: InstanceShape, dep: Deployment) -> list[Finding]:
    """Every broken pair rule of prefill ``p`` and decode ``d``, in table order."""
    found = (rule.pair(p, d, dep) for rule in RULES if rule.pair is not None)
    return [f for f in found if f is not None]


def kv_cache_dtype(kv_dtype: str) -> str:
    """vLLM ``--kv-cache-dtype`` for a plan KV dtype: ``fp8`` or ``auto`` (a 16-bit cache follows the model)."""
    return "fp8" if kv_dtype == "fp8" else "auto"


__all__ = [
    "DEFAULT_ENGINE_VERSION",
    "DEFAULT_SCALE_UP_GPUS",
    "KV_CONNECTORS",
    "RULES",
    "VLLM_BLOCK_SIZES",
    "Deployment",
    "Finding",
    "InstanceShape",
    "Rule",
    "canonical_connector",
    "instance_findings",
    "kv_cache_dtype",
    "pair_findings",
]
