"""Fitted efficiency curves per serving engine and GPU architecture (``catalogs/perf/<engine>.yaml``).

Each curve set (:class:`EfficiencyCurves`) replaces the one global prior of :mod:`hetplan.perf.settings` for one
engine on one architecture:

- GEMM efficiency versus the tokens M in the GEMM: ``eff(M) = gemm_max x M / (M + gemm_half_tokens)`` of the
  dense peak in the compute dtype (small M is memory-bound anyway; large M approaches the ceiling);
- ``mbu``: achieved share of memory bandwidth when a step streams weights; ``kv_mbu`` the same when decode
  attention reads the KV cache (equal to ``mbu`` in curves fitted end to end only);
- ``moe_efficiency``: the routed-expert kernels' speed relative to the GEMM curve's roofline of the same work
  (fused MoE kernels gather, permute and run many small GEMMs; 1 in curves fitted end to end only);
- ``attention_efficiency``: share of the 16-bit peak that attention FLOPs reach (prefill over long contexts);
- ``step_overhead_s`` + ``layer_overhead_s`` x layers + ``moe_layer_overhead_s`` x MoE layers +
  ``seq_overhead_s`` x running sequences: the engine's time per step outside the roofline (scheduling and sampling
  per step; per layer, the latency-bound small kernels -- norms, rotary -- that a roofline of the big operators
  misses, so a 32-layer model does not pay a 61-layer model's fixed cost; per MoE layer, the router, top-k,
  token permutation and grouped-GEMM launches a dense layer does not run). Without the MoE term the fit, where
  most rows are MoE, put that cost into ``step_overhead_s`` and predicted dense models too slow: TensorRT-LLM on
  Hopper, Llama-3.1-70B in-sample TPOT bias +21.3 % -> +10.5 % with it; validation TPOT median |error| 26.3 % ->
  22.0 %, TTFT 29.5 % -> 29.3 %; leave-one-model-out TTFT 37.2 % -> 37.4 %, TPOT 17.0 % -> 16.6 %;
- ``prefill_mix``: 1 when prefill chunks run inside the steps that decode (vLLM V1's chunked prefill,
  TensorRT-LLM's in-flight batching), 0 when prefill batches are steps of their own ahead of decoding (SGLang
  without ``--enable-mixed-chunk``, its default): decodes stop while a prompt prefills (TPOT up) and the prompt's
  step carries no decodes (TTFT down); set per engine by ``benchmarks/calibrate_perf.py`` (``PREFILL_MIX``), not
  fitted; 1 for catalogs without the field;
- all-reduce / all-to-all: ``allreduce_latency_s`` per collective (NCCL's small-message latency; one per call, not
  ``2(t-1)`` of them, so TP8 decode is not slower than TP4) plus bytes over ``link_efficiency`` x the link;
- the closed loop's prefill queue: ``prefill_queue_factor`` scales the M/D/1 wait of a prompt behind others, and
  ``sync_share`` is the share of TTFT that follows the synchronised wave (all clients' prompts at once) rather than
  the staggered steady state. These two are phenomenological: they absorb how a benchmark's clients stay in step;
- ``ttft_overhead_s``: time to first token outside the steps (HTTP, tokenisation, scheduling the new request,
  detokenising and streaming the first token), paid once per request; ``ttft_token_overhead_s`` per prompt token
  outside the GPU (tokenisation, input processing: measured vLLM Llama-3.1-70B TTFT per 1k prompt tokens falls as
  ``a + b / TP``, not ``b / TP``); ``ttft_decode_steps``: decode steps a new request waits before its first token
  besides its own prefill (admission into the running batch, output processing and streaming run a step or more
  behind; measured TTFT grows with the decode step time at prompt loads far below the prefill capacity). Chosen over
  a cost per running sequence by the leave-one-model-out error of ``benchmarks/calibrate_perf.py
  --leave-one-model-out`` (TTFT 45.4 % -> 36.6 % median |error| on the fit split).

The files are written by ``benchmarks/calibrate_perf.py`` (see ``docs/perf-model.md``) and carry their provenance:
rows, models, engine versions, the held-out validation models and fit residuals. Two sections: ``gpu_curves`` per
GPU name, whose kernel-level fields (GEMM, ``mbu``, ``kv_mbu``, attention, all-reduce, MoE) are fitted on that
GPU's measured per-operation kernel latencies in the engine (kernel measurements from NVIDIA AIConfigurator
(Apache-2.0)) and whose overheads and queueing terms are fitted on the end-to-end serving points with those held
fixed; and ``curves`` per architecture, every field fitted end to end, the fallback for a GPU without kernel
tables. A GPU in neither takes the nearest architecture's (by generation, :data:`ARCH_ORDER`) and
:func:`curves_for` says so; an engine with no file takes the built-in prior (:data:`PRIOR`).

Source: hetplan's own reconstruction; the curve shapes follow the roofline of DESIGN §2.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from hetplan.catalog.context import in_use
from hetplan.errors import CatalogError

ARCH_ORDER = ("Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell")
"""NVIDIA generations in order; the nearest fitted one stands in for a GPU without curves."""
NON_NVIDIA_STAND_IN = "Hopper"
"""Architecture whose curves stand in for non-NVIDIA parts (AMD CDNA, Intel Gaudi): their kernels are not fitted."""


@dataclass(frozen=True)
class EfficiencyCurves:
    """Efficiency curves of one engine on one GPU architecture (module docstring). All shares are of the
    datasheet's dense peaks; times in seconds."""

    gemm_max: float = 0.70
    gemm_half_tokens: float = 64.0
    mbu: float = 0.70
    kv_mbu: float = 0.70
    attention_efficiency: float = 0.40
    step_overhead_s: float = 0.004
    layer_overhead_s: float = 1e-5
    moe_layer_overhead_s: float = 1e-5
    seq_overhead_s: float = 2e-5
    allreduce_latency_s: float = 2e-5
    link_efficiency: float = 0.6
    prefill_queue_factor: float = 1.0
    sync_share: float = 0.0
    ttft_overhead_s: float = 0.02
    ttft_token_overhead_s: float = 1e-5
    ttft_decode_steps: float = 2.0
    moe_efficiency: float = 1.0
    sync_half_clients: float = 1e9
    prefill_mix: float = 1.0


PRIOR = EfficiencyCurves()
"""Curves used when an engine has no fitted file: hetplan's own round numbers, not a fit."""

FIT_PARAMETERS = tuple(f.name for f in fields(EfficiencyCurves))


def _curves(values: dict[str, float]) -> EfficiencyCurves:
    """Curves from a catalog mapping; ``kv_mbu`` defaults to ``mbu`` (architecture curves fitted end to end have
    one bandwidth share for weights and KV), ``moe_efficiency`` to 1."""
    if "kv_mbu" not in values and "mbu" in values:
        values = {**values, "kv_mbu": values["mbu"]}
    return EfficiencyCurves(**values)


def normalize_arch(arch: str) -> str:
    """``'Ampere (GA102)'`` -> ``'Ampere'``; unknown names are returned stripped."""
    base = arch.split("(")[0].strip()
    return base


def perf_catalog_path(engine: str) -> Path:
    """Path of ``catalogs/perf/<engine>.yaml`` in the catalog in use (a user catalog folder first, then the shipped
    one; see :meth:`hetplan.catalog.context.Catalog.perf_path`); the user folder's path, absent, when none has it."""
    return in_use().perf_path(engine)


def load_perf_catalog(engine: str) -> dict[str, Any] | None:
    """The fitted document of ``engine`` in the catalog in use (None when none is shipped), read once per catalog
    (:meth:`hetplan.catalog.context.Catalog.perf_doc`).

    Raises:
        CatalogError: the file exists but is not a valid perf catalog.
    """
    return in_use().perf_doc(engine)


def read_perf_catalog(path: Path) -> dict[str, Any]:
    """The fitted perf document at ``path``, checked (kind, curves, known fields).

    Raises:
        CatalogError: not a valid perf catalog.
    """
    from hetplan.catalog.loader import read_yaml_mapping
    from hetplan.errors import InputError

    try:  # the shared reader: a regular file, no aliases, depth, key types, numbers (a user catalog folder's file)
        doc = read_yaml_mapping(path, "perf catalog", "regenerate it with benchmarks/calibrate_perf.py")
    except InputError as exc:
        raise CatalogError(exc.what, exc.why, exc.fix) from None
    if not isinstance(doc, dict) or doc.get("kind") != "perf" or not isinstance(doc.get("curves"), dict):
        raise CatalogError(f"{path} is not a perf catalog", "expected kind: perf and a curves mapping", "regenerate it")
    gpu_curves = doc.get("gpu_curves", {})
    if not isinstance(gpu_curves, dict):
        raise CatalogError(f"{path}: gpu_curves is not a mapping", fix="regenerate it")
    for section, mapping in (("curves", doc["curves"]), ("gpu_curves", gpu_curves)):
        for key, values in mapping.items():
            if not isinstance(values, dict):
                raise CatalogError(f"{path}: {section}.{key} is not a mapping", fix="regenerate it")
            unknown = sorted(set(values) - set(FIT_PARAMETERS))
            if unknown:
                raise CatalogError(f"{path}: {section}.{key} has unknown fields {unknown}", fix="regenerate it")
    return doc


def curves_for(
    engine: str, arch: str, vendor: str = "NVIDIA", gpu: str | None = None
) -> tuple[EfficiencyCurves, str | None]:
    """The curves of ``engine`` on GPU ``gpu`` (architecture ``arch``) and a note when they are not fitted on it.

    A GPU with curves of its own (``gpu_curves``: the kernel-level fields fitted on that GPU's measured kernel
    latencies, the overheads on the engine's end-to-end points) takes them; any other GPU the curves of its
    architecture (``curves``), else the nearest architecture's.

    Returns:
        (curves, note): ``note`` is None when the GPU or its architecture has its own fitted curves, else a
        sentence saying which architecture's curves (or the prior) stand in.
    """
    doc = load_perf_catalog(engine)
    if doc is None:
        return PRIOR, f"no fitted {engine} curves are shipped; the roofline uses hetplan's prior efficiencies"
    per_gpu: dict[str, dict[str, float]] = doc.get("gpu_curves", {})
    if gpu is not None and gpu in per_gpu:
        return _curves(per_gpu[gpu]), None
    fitted: dict[str, dict[str, float]] = doc["curves"]
    name = normalize_arch(arch)
    if name in fitted:
        return _curves(fitted[name]), None
    if vendor.upper() != "NVIDIA" or name not in ARCH_ORDER:
        stand_in = NON_NVIDIA_STAND_IN if NON_NVIDIA_STAND_IN in fitted else sorted(fitted)[0]
    else:
        index = ARCH_ORDER.index(name)
        known = [a for a in ARCH_ORDER if a in fitted]
        stand_in = min(known, key=lambda a: (abs(ARCH_ORDER.index(a) - index), -ARCH_ORDER.index(a)))
    note = (
        f"no measured {engine} data for {name or 'this'} GPUs: the roofline uses the {stand_in} curves fitted for "
        f"{engine} (measure it with 'hetplan profile' to replace the datasheet peaks)"
    )
    return _curves(fitted[stand_in]), note


__all__ = [
    "ARCH_ORDER",
    "FIT_PARAMETERS",
    "PRIOR",
    "EfficiencyCurves",
    "curves_for",
    "load_perf_catalog",
    "normalize_arch",
    "perf_catalog_path",
]
