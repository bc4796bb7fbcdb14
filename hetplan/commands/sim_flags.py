"""The values of ``hetplan simulate``'s own flags, read and checked: ``--host-kv`` sizes (:func:`parse_host_kv`) and
``--slo CLASS=TTFT[,TPOT]`` per-class SLOs (:func:`class_slos`); each error names the flag and how to write it.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hetplan.errors import InputError
from hetplan.units import parse_duration_s

if TYPE_CHECKING:
    from hetplan.sim.hostkv import HostKvTier
    from hetplan.workload.model import ClassSlo


#: Byte units ``--host-kv`` sizes take, in bytes.
SIZE_UNITS = {"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e([+-]?[0-9]+))?\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_host_kv(text: str) -> HostKvTier:
    """``--host-kv``: a host KV tier (:class:`hetplan.sim.hostkv.HostKvTier`) from ``dram=SIZE[,ssd=SIZE]`` (either
    key may be left out: DRAM then takes the tier's default 256 GiB, SSD is unbounded; ``dram=0`` puts everything
    on SSD), sizes per instance with a unit (KiB, MiB, GiB, TiB or KB, MB, GB, TB; ``0`` needs none). Restore
    bandwidths and latency are the tier's defaults (DRAM 25 GB/s, SSD 5 GB/s, 1 ms).

    Raises:
        InputError: an empty value, an item without ``=``, an unknown or repeated key, or a size that is not a
            finite number ≥ 0 with a known unit.
    """
    from hetplan.sim.hostkv import HostKvTier

    fix = "write e.g. --host-kv dram=256GiB,ssd=2TiB"
    sizes: dict[str, float] = {}
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise InputError(f"--host-kv {text!r}: an empty item", "it takes dram=SIZE and/or ssd=SIZE", fix)
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if not eq:
            raise InputError(f"--host-kv {item!r} has no '='", "each item is KEY=SIZE (keys: dram, ssd)", fix)
        if key not in ("dram", "ssd"):
            raise InputError(f"--host-kv: unknown key {key!r}", "the keys are dram and ssd", fix)
        if key in sizes:
            raise InputError(f"--host-kv gives {key} twice", fix="give each of dram and ssd once")
        sizes[key] = _size_gib(value, key, fix)
    return HostKvTier(dram_gib=sizes.get("dram", HostKvTier.dram_gib), ssd_gib=sizes.get("ssd", math.inf))


def _size_gib(value: str, key: str, fix: str) -> float:
    """A ``--host-kv`` size in GiB (:func:`parse_host_kv`'s rule)."""
    m = _SIZE.match(value)
    unit = (m.group(3) if m else "").lower()
    if m is None or (unit and unit not in SIZE_UNITS):
        raise InputError(f"--host-kv {key}={value!r} is not a size",
                         "sizes are a number ≥ 0 with a unit: KiB, MiB, GiB, TiB, KB, MB, GB or TB", fix)  # fmt: skip
    number = float(m.group(1) + (f"e{m.group(2)}" if m.group(2) else ""))
    if not math.isfinite(number):
        raise InputError(f"--host-kv {key}={value!r} is not a finite size", fix=fix)
    if not unit and number != 0:
        raise InputError(f"--host-kv {key}={value!r} has no unit", "only 0 may go without one", fix)
    return number * SIZE_UNITS.get(unit, 1.0) / 2**30


def _slo_value(text: str, cls: str, which: str) -> float:
    try:
        return parse_duration_s(text, "slo")
    except InputError as exc:
        raise InputError(
            f"--slo {cls}: {which} {exc.what.removeprefix('slo: ')}",
            exc.why,
            f"write e.g. --slo {cls}=1s,50ms",
        ) from None


def class_slos(items: Sequence[str]) -> dict[str, ClassSlo]:
    """Per-class SLOs from ``--slo CLASS=TTFT[,TPOT]`` items (durations with units).

    Raises:
        InputError: an item that cannot be read (naming it).
    """
    from hetplan.workload.model import ClassSlo

    slos: dict[str, ClassSlo] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        parts = [p.strip() for p in rest.split(",")]
        if not sep or not name.strip() or not 1 <= len(parts) <= 2 or not parts[0]:
            raise InputError(
                f"--slo: cannot read {item!r}",
                "expected CLASS=TTFT or CLASS=TTFT,TPOT with units",
                "write e.g. --slo AzureLLMInferenceTrace_code=1s,50ms",
            )
        cls = name.strip()
        ttft = _slo_value(parts[0], cls, "TTFT")
        tpot = _slo_value(parts[1], cls, "TPOT") if len(parts) == 2 and parts[1] else None
        slos[cls] = ClassSlo(ttft, tpot)
    return slos


__all__ = ["SIZE_UNITS", "class_slos", "parse_host_kv"]
