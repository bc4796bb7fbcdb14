"""``hetplan estimate`` (:func:`hetplan.api.estimate`): latency, memory and throughput of one instance.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.perf.estimate import Estimate
    from hetplan.perf.settings import PerfSettings


def estimate(
    model: str,
    gpu: str,
    tp: int,
    pp: int,
    batch: int,
    prompt_tokens: int,
    context_tokens: int | None,
    output_tokens: int | None,
    weight_dtype: str,
    kv_dtype: str,
    settings: PerfSettings | None,
    profiles: Sequence[Path],
    engine: str,
    catalog: Catalog | None = None,
) -> Estimate:
    """See :func:`hetplan.api.estimate` (``catalog``: its models, GPUs and fitted curves; None: the shipped
    catalogs).

    Raises:
        InputError: unknown model/GPU, bad TP/PP or sizes. OutOfMemoryError: weights do not fit.

    TP or PP beyond the GPU's NVLink domain (``scale_up_gpus``) spans several nodes: the collectives that cross them
    run over the catalog's scale-out network (``network_gbit_per_s``; a warning says so).
    """
    for field, value in (("batch", batch), ("prompt_tokens", prompt_tokens)):
        if value < 1:
            raise InputError(f"{field} must be >= 1, got {value}", fix=f"pass --{field.replace('_', '-')} 1 or more")
    if output_tokens is not None and output_tokens < 1:
        raise InputError(f"output_tokens must be >= 1, got {output_tokens}", fix="pass --output-tokens 1 or more")
    from hetplan.catalog.context import Catalog
    from hetplan.catalog.profile import load_profiles, profile_notes
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.estimate import estimate as _estimate
    from hetplan.perf.latency import InstanceModel, compute_dtype
    from hetplan.perf.measured import measured_notes
    from hetplan.perf.points import check_instance_gpus, nodes_note
    from hetplan.perf.settings import PerfSettings
    from hetplan.planning.request import profile_records

    catalog = catalog or Catalog.shipped()
    check_instance_gpus(tp, 1, pp)
    arch = ModelArch(catalog.find_model(model), weight_dtype, kv_dtype)
    loaded = load_profiles(profiles, catalog) if profiles else None
    catalog = catalog.with_overlay(loaded.specs if loaded else ())
    spec = catalog.find_gpu(gpu)
    inst = InstanceModel(arch, spec, tp, pp, settings or PerfSettings.for_engine(engine), catalog)
    ctx = prompt_tokens if context_tokens is None else context_tokens
    if ctx < 1:
        raise InputError(f"context_tokens must be >= 1, got {ctx}", fix="pass --context-tokens 1 or more")
    est = _estimate(inst, batch, prompt_tokens, ctx, output_tokens)
    # measured figures: say what each profile did, as plan does
    notes = profile_notes(loaded, [spec.name]) if loaded else []
    notes += measured_notes([spec], compute_dtype(arch.weight_dtype))
    notes += inst.curve_notes
    span = nodes_note(spec, tp, 1, pp)  # TP or PP beyond one node: the scale-out link the collectives cross
    if span:
        notes.append(span)
    return replace(est, warnings=notes, profiles=profile_records(loaded))
