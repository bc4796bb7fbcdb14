"""A plan's ``perf_settings`` block: :class:`~hetplan.perf.settings.PerfSettings` to and from a document.

Every field is written (``dataclasses.asdict``), and read back with unknown keys refused and each value's type and
range checked, so a hand-edited plan cannot make the simulator or the emitters produce meaningless figures.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import asdict, fields
from typing import Any

from hetplan.errors import InputError
from hetplan.perf.settings import GpuEfficiency, PerfSettings


def settings_to_doc(settings: PerfSettings) -> dict[str, Any]:
    """Every field of ``settings`` as plain data (efficiency overrides as ``[name, {...}]`` pairs); a calibration's
    ``corrections`` and ``calibration_sha256`` only when a calibration file was given (plans without one keep their
    bytes)."""
    doc = asdict(settings)
    doc["gpu_overrides"] = [[name, eff] for name, eff in doc["gpu_overrides"]]
    if not settings.corrections:
        doc.pop("corrections")
        doc.pop("calibration_sha256")
    else:
        doc["corrections"] = [
            {**{k: (v or "*") if k == "tp" else v for k, v in c.items() if k != "band"},
             **({"band": {conf: {"ttft": t, "tpot": p} for conf, t, p in c["band"]}} if c["band"] else {})}
            for c in doc["corrections"]
        ]  # fmt: skip
    return doc


# what a plan's perf_settings may hold: (low, high, low inclusive); high is inclusive
_EFFICIENCY_RANGES: dict[str, tuple[float, float, bool]] = {
    "prefill_mfu": (0.0, 1.0, False),
    "decode_mfu": (0.0, 1.0, False),
    "decode_mbu": (0.0, 1.0, False),
    "step_overhead_s": (0.0, 10.0, True),
    "tp_sync_overhead_s": (0.0, 10.0, True),
    "allreduce_latency_s": (0.0, 10.0, True),
    "link_efficiency": (0.0, 1.0, False),
}
_SETTING_RANGES: dict[str, tuple[float, float, bool]] = {
    "gpu_memory_utilization": (0.0, 1.0, False),
    "activation_reserve_gib": (0.0, 1e4, True),
    "cudagraph_reserve_gib": (0.0, 1e4, True),
    "sampler_bytes_per_logit": (0.0, 1e4, True),
    "block_size_tokens": (1, 1 << 20, True),
    "max_num_seqs": (1, 1 << 20, True),
    "max_num_batched_tokens": (1, 1 << 24, True),
    "network_efficiency": (0.0, 1.0, False),
    "kv_transfer_base_latency_s": (0.0, 100.0, True),
    "pp_link_latency_s": (0.0, 100.0, True),
    "reference_gemm_efficiency": (0.0, 1.0, False),
    "reference_memory_efficiency": (0.0, 1.0, False),
}
_INT_SETTINGS = {"block_size_tokens", "max_num_seqs", "max_num_batched_tokens"}


def _check_range(where: str, value: Any, rng: tuple[float, float, bool], integer: bool = False) -> Any:
    """``value`` checked against ``rng``; a numeric string (PyYAML reads ``5e-05`` as text) becomes a float."""
    lo, hi, lo_incl = rng
    if isinstance(value, str) and not integer:
        try:
            value = float(value)
        except ValueError:
            pass
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not math.isfinite(float(value)):
        kind = "an integer" if integer else "a finite number"
        raise InputError(f"plan {where} must be {kind}, got {value!r}", fix=f"fix {where} in the plan")
    bad = value < lo if lo_incl else value <= lo
    if bad or value > hi:
        left = "[" if lo_incl else "("
        raise InputError(
            f"plan {where} = {value!r} is outside {left}{lo:g}, {hi:g}]",
            "the simulator would produce meaningless step times or no iterations with it",
            f"fix {where} in the plan (or re-plan with a valid settings file)",
        )
    return value


def settings_from_doc(doc: Any) -> PerfSettings:
    """Rebuild :class:`PerfSettings` from a plan's ``perf_settings`` (unknown keys refused, ranges checked).

    Ranges: MFU/MBU and efficiencies in (0, 1], overheads and latencies ≥ 0 seconds, ``max_num_seqs``,
    ``max_num_batched_tokens`` and ``block_size_tokens`` integers ≥ 1, ``gpu_memory_utilization`` in (0, 1].

    Raises:
        InputError: a field is unknown, has the wrong type or is out of range (the message names it, e.g.
            ``perf_settings.default.prefill_mfu``).
    """
    if not isinstance(doc, dict):
        raise InputError("plan perf_settings is not a mapping", fix="write the plan with this hetplan")
    known = {f.name for f in fields(PerfSettings)}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise InputError(f"plan perf_settings has unknown fields {unknown}", fix="write the plan with this hetplan")
    kw = dict(doc)
    if "engine" in kw:
        from hetplan.perf.engines import ENGINE_NAMES

        if kw["engine"] not in ENGINE_NAMES:
            raise InputError(
                f"plan perf_settings.engine = {kw['engine']!r} is not one of {', '.join(ENGINE_NAMES)}",
                fix="fix perf_settings.engine in the plan",
            )
    if "corrections" in kw:
        from hetplan.perf.user_calibration import KIND, SCHEMA_VERSION, corrections_from_doc

        doc_c = {"kind": KIND, "schema_version": SCHEMA_VERSION, "corrections": kw["corrections"]}
        kw["corrections"] = corrections_from_doc(doc_c, "plan perf_settings")
        if not isinstance(kw.get("calibration_sha256", ""), str):
            raise InputError("plan perf_settings.calibration_sha256 must be text", fix="fix it in the plan")
    if "engine_version" in kw and not isinstance(kw["engine_version"], str):
        raise InputError("plan perf_settings.engine_version must be text", fix="fix it in the plan")
    if kw.get("max_model_len_tokens") is not None:
        kw["max_model_len_tokens"] = _check_range(
            "perf_settings.max_model_len_tokens", kw["max_model_len_tokens"], (1, 1 << 24, True), True
        )
    for name, rng in _SETTING_RANGES.items():
        if name in kw:
            kw[name] = _check_range(f"perf_settings.{name}", kw[name], rng, name in _INT_SETTINGS)

    def eff_checked(where: str, eff: Any) -> Any:
        if not isinstance(eff, dict):
            return eff
        return {k: _check_range(f"{where}.{k}", v, _EFFICIENCY_RANGES[k]) if k in _EFFICIENCY_RANGES else v
                for k, v in eff.items()}  # fmt: skip

    if "default" in kw:
        kw["default"] = eff_checked("perf_settings.default", kw["default"])
    if isinstance(kw.get("gpu_overrides"), (list, tuple)):
        kw["gpu_overrides"] = [
            (e[0], eff_checked(f"perf_settings.gpu_overrides[{i}]", e[1])) if isinstance(e, (list, tuple))
            and len(e) == 2 else e for i, e in enumerate(kw["gpu_overrides"])
        ]  # fmt: skip
    try:
        if "default" in kw:
            kw["default"] = GpuEfficiency(**kw["default"])
        if "gpu_overrides" in kw:
            kw["gpu_overrides"] = tuple((str(n), GpuEfficiency(**e)) for n, e in kw["gpu_overrides"])
        return PerfSettings(**kw)
    except (TypeError, ValueError) as exc:
        raise InputError("plan perf_settings is malformed", str(exc), "write the plan with this hetplan") from None


__all__ = ["settings_from_doc", "settings_to_doc"]
