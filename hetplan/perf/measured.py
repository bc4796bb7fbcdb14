"""How measured GPU figures (``hetplan profile``) replace datasheet peaks and efficiency priors.

The efficiency priors of :mod:`hetplan.perf.settings` (``prefill_mfu``, ``decode_mfu``, ``decode_mbu``) were fitted
end to end on one reference system (DGX-A100, vLLM): each is the product of what the kernels reach against the
datasheet (a tuned GEMM, a streaming read) and what the serving stack loses on top of them (attention, norms,
launches, scheduling). A profile measures the first factor on the user's own GPU, so hetplan divides it out of the
prior and keeps the second::

    effective compute   = measured GEMM TFLOP/s  x  prefill_mfu / reference_gemm_efficiency
    effective bandwidth = measured read GB/s     x  decode_mbu  / reference_memory_efficiency

(``decode_mfu`` like ``prefill_mfu``). The result is expressed as an efficiency against the datasheet peak, so the
rest of the model (:class:`hetplan.perf.latency.InstanceModel`) is unchanged: ``mfu' = (measured / peak) x
prior / reference``, capped so that the effective figure never exceeds the measured one. Profiling a GPU whose
kernels reach exactly the reference efficiencies therefore changes nothing, which is the continuity the priors
need. A measured NCCL all-reduce replaces ``link_efficiency`` (bus bandwidth / the unidirectional datasheet link,
the ring formula's ``B_link`` being nccl-tests' bus bandwidth) and ``allreduce_latency_s`` (smallest-message time /
``2(t-1)``).

The two reference efficiencies are not measured on the A100 the priors came from (no such system was at hand):
the defaults, 0.80 for a bf16 GEMM and 0.90 for a streaming read, are hetplan's assumption, in line with the
ceilings reported for an H200 (about 790 of 989 dense TFLOP/s and 4.3 of 4.8 TB/s; not measured by hetplan).
Calibrate:
run ``hetplan profile`` on the system your priors were fitted on and set the :class:`PerfSettings` fields
``reference_gemm_efficiency = measured bf16 / datasheet bf16`` and ``reference_memory_efficiency = measured read /
datasheet bandwidth`` (and refit the priors on that system's latencies as ``settings.py`` describes).

Source: hetplan's own reconstruction; DESIGN §2 ("efficiency priors, to be replaced by profiles").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hetplan.catalog.schemas import GpuSpec
from hetplan.perf.settings import GpuEfficiency, PerfSettings


def _scaled(prior: float, measured_over_peak: float, reference: float) -> float:
    return min(prior / reference, 1.0) * measured_over_peak


def measured_efficiency(
    gpu: GpuSpec, prior: GpuEfficiency, compute_dtype: str, settings: PerfSettings = PerfSettings()
) -> GpuEfficiency:
    """The efficiencies (against ``gpu``'s datasheet peaks) that make the model use ``gpu.measured``.

    Args:
        gpu: a GPU with a ``measured`` block (returned unchanged otherwise).
        prior: the efficiency prior in force (default or a per-GPU override).
        compute_dtype: tensor-core dtype of the GEMMs (``bf16``, ``fp16``, ``fp8``, ``int8``).
        settings: holds ``reference_gemm_efficiency`` / ``reference_memory_efficiency``, the kernel efficiencies
            of the system the prior was fitted on.

    Returns:
        A :class:`GpuEfficiency` whose ``prefill_mfu``/``decode_mfu`` x datasheet TFLOPS equals measured TFLOPS x
        prior / reference (capped at the measured figure), likewise ``decode_mbu`` with the measured read
        bandwidth, and, when an all-reduce was measured, ``link_efficiency`` and ``allreduce_latency_s`` from it.
        Dtypes the profile did not measure keep the prior's compute efficiency.
    """
    m = gpu.measured
    if m is None:
        return prior
    eff = prior
    measured_tflops = m.tflops(compute_dtype)
    try:
        peak_tflops, _ = gpu.dense_tflops(compute_dtype)
    except KeyError:
        peak_tflops = None
    if measured_tflops is not None and peak_tflops:
        ratio = measured_tflops / peak_tflops
        eff = replace(
            eff,
            prefill_mfu=_scaled(prior.prefill_mfu, ratio, settings.reference_gemm_efficiency),
            decode_mfu=_scaled(prior.decode_mfu, ratio, settings.reference_gemm_efficiency),
        )
    eff = replace(
        eff,
        decode_mbu=_scaled(
            prior.decode_mbu, m.memory_read_gb_per_s / gpu.hbm_gb_per_s, settings.reference_memory_efficiency
        ),
    )
    if m.allreduce_bus_gb_per_s is not None and m.allreduce_gpus:
        eff = replace(eff, link_efficiency=m.allreduce_bus_gb_per_s / (gpu.interconnect_gb_per_s / 2.0))
        if m.allreduce_latency_s is not None:
            eff = replace(eff, allreduce_latency_s=m.allreduce_latency_s / (2 * (m.allreduce_gpus - 1)))
    return eff


def measured_notes(gpus: Sequence[GpuSpec], compute_dtype: str) -> list[str]:
    """Warnings every consumer of measured figures (plan, estimate, fit, simulate, ...) prints for ``gpus``.

    Two cases, whatever the figures came from (``--profile`` or a catalog folder from ``hetplan profile merge``):

    * CPU figures filed under a GPU entry (a CPU profile taken with ``--gpu NAME``): the GPU now behaves like the
      CPU, which is only good for testing the pipeline. A device type registered from a CPU profile (vendor
      ``measured``) is a CPU by name and is not flagged.
    * no measured GEMM for ``compute_dtype``: the model uses a measured fallback (:meth:`GpuMeasured.tflops`,
      e.g. bf16 for fp16 or fp8) and says which, or, with none (e.g. only fp32 measured), keeps the datasheet
      peak x efficiency prior for compute while memory uses the measured bandwidth.

    Args:
        gpus: the GPU entries in use (those without a ``measured`` block are skipped).
        compute_dtype: tensor-core dtype of the GEMMs (:func:`hetplan.perf.latency.compute_dtype`).

    Returns:
        One line per finding, in the order of ``gpus``. Source: hetplan's own reconstruction.
    """
    notes = []
    for gpu in gpus:
        m = gpu.measured
        if m is None:
            continue
        src = m.device_name + (f", {m.profiled_at}" if m.profiled_at else "")
        if m.device_kind == "cpu" and gpu.vendor != "measured":
            notes.append(
                f"{gpu.name}: these are a CPU's figures, not a {gpu.name}'s (measured on {src}): the model treats "
                f"it as that CPU; use such results only to test the pipeline"
            )
        used = m.tflops(compute_dtype)
        if used is not None and compute_dtype not in m.gemm_tflops:
            other = next(d for d, v in sorted(m.gemm_tflops.items()) if v == used)
            notes.append(
                f"{gpu.name}: the profile measured no {compute_dtype} GEMM; the model uses its measured {other} "
                f"figure ({used:,.4g} TFLOP/s) for {compute_dtype}"
            )
        if used is None:
            measured = ", ".join(sorted(m.gemm_tflops)) or "none"
            notes.append(
                f"{gpu.name}: the profile measured no {compute_dtype} GEMM (measured: {measured}), so compute uses "
                f"the datasheet peak x efficiency prior while memory uses the measured "
                f"{m.memory_read_gb_per_s:,.4g} GB/s"
            )
    return notes
