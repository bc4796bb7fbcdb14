"""Request classes of a scenario (``classes:``): which requests belong to which class, and the SLOs each has.

A class is chosen per request by a ``share`` (a uniform draw per request from :data:`CLASS_SEED`, so the same trace
gives the same split every time, and a request keeps its class whichever part of the trace it lands in), by the
``value`` of the trace's ``workload.class_column``, or brings a trace ``path`` of its own (mixed with the
workload's requests by arrival, each trace on its own clock from 0). Each class has its own TTFT/TPOT SLO (the
scenario's ``slo`` where it leaves one out); the percentile is shared.

Sizing (docs/methods.md, "Request classes"): :func:`binding_slos` gives the tightest TTFT and the tightest TPOT
among the classes, which decode is held to (every class's requests share each decode step) and Mélange's buckets
use; the Cauchy combos' prefill capacities hold each class to its own TTFT over its own requests
(:func:`hetplan.perf.capacity.class_prefill_capacities`, fed :func:`class_slos`). The verification then judges
each class against its own SLOs (:mod:`hetplan.sim.verify`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hetplan.errors import InputError
from hetplan.scenario import Scenario
from hetplan.units import parse_duration_s
from hetplan.workload.model import Workload

#: Seed of the per-request draw that splits a workload into classes by share.
CLASS_SEED = 0


def class_slos(scenario: Scenario) -> dict[str, tuple[float, float]]:
    """Each class's ``(ttft_s, tpot_s)``, in the scenario's order (the scenario's ``slo`` where a class leaves one
    out); empty when the scenario declares no classes.

    Raises:
        InputError: a duration that does not parse (named with its class).
    """
    out: dict[str, tuple[float, float]] = {}
    for c in scenario.classes or ():
        ttft = parse_duration_s(c.slo.ttft or scenario.slo.ttft, f"classes[{c.name}].slo.ttft")
        tpot = parse_duration_s(c.slo.tpot or scenario.slo.tpot, f"classes[{c.name}].slo.tpot")
        out[c.name] = (ttft, tpot)
    return out


def binding_slos(scenario: Scenario) -> tuple[float, float] | None:
    """The tightest TTFT and the tightest TPOT among the classes, ``(ttft_s, tpot_s)`` (possibly of two different
    classes): decode capacities and Mélange are sized against them (prefill per class, module docstring); None
    without classes (the scenario's ``slo`` applies)."""
    slos = class_slos(scenario)
    if not slos:
        return None
    return min(t for t, _ in slos.values()), min(t for _, t in slos.values())


def assign_classes(workload: Workload, scenario: Scenario, trace: Path | None) -> Workload:
    """``workload`` with each request's class in ``class_labels`` (unchanged without ``classes``), and the
    requests of each class with its own ``path`` added (the traces mixed by arrival, each from 0; the result's
    rate is the mix's own); ``trace``: the CSV file the workload was read from (for classes by ``value``; None
    for a synthetic workload).

    Raises:
        InputError: classes by value on a synthetic workload, a missing or empty class column, a trace request
            whose column value names no class, or an unreadable class trace or one without timestamps.
    """
    if not scenario.classes:
        return workload
    own = [c for c in scenario.classes if c.path is None]
    labelled = _label_own(workload, scenario, own, trace)
    added = [c for c in scenario.classes if c.path is not None]
    return _merged(labelled, scenario, added) if added else labelled


def _merged(workload: Workload, scenario: Scenario, added: list[Any]) -> Workload:
    """``workload`` with the requests of each class's own trace added (each trace on its own clock from 0)."""
    from hetplan.workload.readers import load_workload

    parts = [workload]
    for c in added:
        path = Path(scenario.resolve(c.path) or "")
        display = path.name
        if path.is_file():
            display = f"{path.name} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]})"
        part = load_workload(path, "auto", None, display)
        parts.append(replace(part, class_labels=np.full(part.n_requests, c.name)))
    for part in parts:
        if part.arrival_s is None:
            raise InputError(
                f"workload {part.name} has no timestamps, so its requests cannot be mixed with another class's trace",
                fix="give every trace of a scenario with class paths its timestamps (Azure CSV, Mooncake JSONL)",
            )
    arrival = np.concatenate([np.asarray(w.arrival_s, dtype=float) for w in parts])
    labels = np.concatenate([np.asarray(w.class_labels, dtype=str) for w in parts])
    order = np.lexsort((labels, arrival))  # by arrival, then class name (a fixed order for ties)
    arrival = arrival[order]
    duration = float(arrival[-1] - arrival[0])
    return Workload(
        name="+".join(w.name for w in parts),
        source="; ".join(w.source for w in parts),
        attribution="; ".join(dict.fromkeys(w.attribution for w in parts if w.attribution)),
        arrival_rate_per_s=(arrival.size - 1) / duration if duration > 0 else None,
        duration_s=duration,
        prompt_tokens=np.concatenate([w.prompt_tokens for w in parts])[order],
        output_tokens=np.concatenate([w.output_tokens for w in parts])[order],
        arrival_s=arrival - arrival[0],
        class_labels=labels[order],
    )


def _label_own(workload: Workload, scenario: Scenario, classes: list[Any], trace: Path | None) -> Workload:
    """The workload's own requests labelled by the classes without a path (:func:`assign_classes`)."""
    n = workload.n_requests
    if len(classes) == 1 and classes[0].share is None and classes[0].value is None:
        return replace(workload, class_labels=np.full(n, classes[0].name))
    if classes[0].share is not None:
        shares = np.array([float(c.share or 0.0) for c in classes])
        edges = np.cumsum(shares)[:-1] / shares.sum()
        draw = np.random.default_rng(CLASS_SEED).random(n)
        index = np.searchsorted(edges, draw, side="right")
        labels = np.array([c.name for c in classes], dtype=str)[index]
        return replace(workload, class_labels=labels)
    column = scenario.workload.class_column or ""
    if trace is None:
        raise InputError(
            "classes by value need a trace with a class column; this workload is synthetic",
            fix="give each class a share instead",
        )
    from hetplan.workload.readers import _class_labels, trace_format

    if trace_format(trace, sniff=True) == "mooncake":
        raise InputError(
            f"workload.class_column is for CSV traces; {trace.name} holds JSON lines",
            fix="give each class a share instead, or convert the trace to CSV",
        )
    values = _class_labels(trace, column, n)
    by_value = {c.value: c.name for c in classes}
    unknown = sorted(set(values.tolist()) - set(by_value))
    if unknown:
        raise InputError(
            f"trace {trace.name}: {column!r} has values {unknown[:5]} that no class names",
            f"classes take the values {sorted(v for v in by_value if v)}",
            "add a class for each value (classes[].value)",
        )
    labels = np.array([by_value[v] for v in values.tolist()], dtype=str)
    return replace(workload, class_labels=labels)


def check_slo_override(classes: Any, key: str, where: str) -> None:
    """Refuse a change of the scenario's ``slo.<key>`` (``ttft`` or ``tpot``; ``where``: the flag or axis) that no
    request class would see: every class of ``classes`` (a scenario's ``classes`` as data) sets its own.

    Raises:
        InputError: each class has its own ``key``.
    """
    if not isinstance(classes, list) or not classes:
        return
    own = [c for c in classes if isinstance(c, dict) and (c.get("slo") or {}).get(key) is not None]
    if len(own) == len(classes):
        raise InputError(
            f"{where} changes slo.{key}, but every request class of the scenario sets its own {key}",
            "the scenario's slo applies only to classes that leave it out",
            f"change classes[].slo.{key} in the scenario file",
        )


def classes_doc(scenario: Scenario, workload: Workload) -> list[dict[str, Any]]:
    """The plan's ``scenario.classes``: per class its name, SLOs (seconds), rule and requests in ``workload``."""
    slos = class_slos(scenario)
    labels = workload.class_labels
    out = []
    for c in scenario.classes or ():
        ttft, tpot = slos[c.name]
        row: dict[str, Any] = {"name": c.name, "ttft_s": ttft, "tpot_s": tpot}
        row |= {"share": c.share} if c.share is not None else {"value": c.value} if c.value is not None else {}
        if c.path is not None:
            row["path"] = Path(c.path).name
        row["requests"] = 0 if labels is None else int((labels == c.name).sum())
        out.append(row)
    return out


__all__ = ["CLASS_SEED", "assign_classes", "binding_slos", "check_slo_override", "class_slos", "classes_doc"]
