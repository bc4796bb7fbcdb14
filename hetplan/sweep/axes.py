"""The axes a sweep grid may vary, each mapped onto one existing scenario field or plan option.

An axis is a list of values (``goodputs: [3, 5, 8]``; ``slos`` may also be a mapping of tier name to SLO block).
Every axis writes the fields in :attr:`Axis.fields`; two axes that write the same field (``slos`` and ``ttfts``,
``workloads`` and ``traces``) conflict, and the grid is refused. Names that map onto nothing in the planner
(:data:`NOT_PLANNER_FEATURES`, e.g. ``purchases``) are refused with the reason; any other unknown name is refused
with the known ones. Paths in values are relative to the grid file.

=============  =====================  ===========================================================================
axis           sets                   values
=============  =====================  ===========================================================================
scenarios      the base scenario      scenario files
models         ``model``              catalog names or ``config.json`` paths
workloads      ``workload``           trace paths, or workload blocks (``{synthetic: {class: balanced, ...}}``)
traces         ``workload``           trace paths (Azure CSV, Mooncake JSONL, length CSV)
goodputs       ``goodput_req_per_s``  req/s
slos           ``slo``                SLO blocks ``{ttft: 2s, tpot: 100ms, percentile: p90}``, a list or by name
ttfts/tpots    ``slo.ttft``/``tpot``  durations (``1s``, ``80ms``)
percentiles    ``slo.percentile``     p90, 99%, 0.9
gpu_sets       ``gpus``               lists of GPU names
inventories    ``inventory``          mappings GPU -> count
clouds         ``cloud``              aws, azure, gcp, lambda, nebius, runpod
regions        ``region``             regions to rent in (us-east-2, westus3; ``hetplan catalog prices``)
prices         ``prices``             price files (a price file wins over the cloud for the GPUs it prices)
spot           ``spot``               true / false
headrooms      ``headroom``           fractions
tps            ``tp``                 lists of TP degrees
max_ratios     ``max_ratio``          whole numbers
dtypes         ``weight_dtype``       bf16, fp16, fp8, int8, int4
kv_dtypes      ``kv_dtype``           bf16, fp16, fp8
strategies     the plan's strategy    cauchy, homogeneous, melange
engines        the plan's engine      vllm (the only engine hetplan plans for today)
policies       the check's policy     fcfs, sjf, edf, cascade (the simulated check's scheduling policy)
=============  =====================  ===========================================================================

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetplan.errors import InputError


@dataclass
class CaseOptions:
    """The options a sweep case sets besides its scenario fields: the plan's ``strategy`` and ``engine`` and the
    simulated check's ``policy`` (lower case; set by the grid's defaults, then by the axes)."""

    strategy: str
    engine: str
    policy: str


@dataclass(frozen=True)
class Axis:
    """One axis: ``name`` in the grid, the ``fields`` it writes (dotted scenario paths, or ``@strategy``,
    ``@engine``, ``@policy``, ``@base`` for what is not a scenario field) and a one-line ``help``."""

    name: str
    fields: tuple[str, ...]
    help: str


AXES: dict[str, Axis] = {
    a.name: a
    for a in (
        Axis("scenarios", ("@base",), "base scenario files"),
        Axis("models", ("model",), "catalog model names or config.json paths"),
        Axis("workloads", ("workload",), "trace paths or workload blocks"),
        Axis("traces", ("workload",), "trace paths"),
        Axis("goodputs", ("goodput_req_per_s",), "goodput targets, req/s"),
        Axis("slos", ("slo",), "SLO blocks (ttft, tpot, percentile)"),
        Axis("ttfts", ("slo.ttft",), "TTFT SLOs"),
        Axis("tpots", ("slo.tpot",), "TPOT SLOs"),
        Axis("percentiles", ("slo.percentile",), "SLO percentiles"),
        Axis("gpu_sets", ("gpus",), "candidate GPU lists"),
        Axis("inventories", ("inventory",), "GPU inventories"),
        Axis("clouds", ("cloud",), "clouds whose catalog prices are used"),
        Axis("regions", ("region",), "regions rented in"),
        Axis("prices", ("prices",), "price files"),
        Axis("spot", ("spot",), "spot (true) or on-demand (false) prices"),
        Axis("headrooms", ("headroom",), "goodput headroom fractions"),
        Axis("tps", ("tp",), "lists of TP degrees"),
        Axis("max_ratios", ("max_ratio",), "largest n and m of an n:m combo"),
        Axis("dtypes", ("weight_dtype",), "weight dtypes"),
        Axis("kv_dtypes", ("kv_dtype",), "KV cache dtypes"),
        Axis("strategies", ("@strategy",), "plan strategies"),
        Axis("engines", ("@engine",), "serving engines"),
        Axis("policies", ("@policy",), "scheduling policies of the simulated check"),
    )
}

#: Names a grid may reach for that map onto no planner feature today, with the reason given when refused.
NOT_PLANNER_FEATURES = {
    "purchases": "hetplan does not plan GPU purchases yet (the purchases column lists the GPUs per type each "
    "plan uses)",
}
#: Axes that pose the question (what is served, at what target and SLO); the others are ways to answer it.
QUESTION_AXES = ("scenarios", "models", "workloads", "traces", "goodputs", "slos", "ttfts", "tpots", "percentiles")
#: Axes that say what is served: a Pareto front of cost against goodput and SLO is drawn per value of these.
SERVED_AXES = ("scenarios", "models", "workloads", "traces")
ENGINES = ("vllm",)


def check_axis_name(name: str, where: str = "axes") -> Axis:
    """The axis called ``name``.

    Raises:
        InputError: an unknown name (with the closest known one) or one that maps onto no planner feature.
    """
    axis = AXES.get(name)
    if axis is not None:
        return axis
    if name in NOT_PLANNER_FEATURES:
        raise InputError(
            f"axis {name!r} ({where}) is not supported: {NOT_PLANNER_FEATURES[name]}",
            "every axis sets an existing scenario field or plan option",
            f"drop {name!r}; the axes are: {', '.join(AXES)}",
        )
    close = difflib.get_close_matches(name, list(AXES), n=1)
    raise InputError(
        f"unknown axis {name!r} ({where})" + (f"; did you mean {close[0]!r}?" if close else ""),
        f"the axes are: {', '.join(AXES)} (docs/sweep.md)",
        f"rename or drop {name!r}",
    )


def overlaps(a: str, b: str) -> bool:
    """True when field paths ``a`` and ``b`` are the same field or one holds the other (``slo``, ``slo.ttft``)."""
    return a == b or a.startswith(b + ".") or b.startswith(a + ".")


def check_conflicts(names: list[str]) -> None:
    """Refuse two axes of one grid that write the same field.

    Raises:
        InputError: naming both axes and the field.
    """
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for fa in AXES[a].fields:
                for fb in AXES[b].fields:
                    if overlaps(fa, fb):
                        field = fa if len(fa) <= len(fb) else fb
                        raise InputError(
                            f"axes {a!r} and {b!r} conflict: both set {field.lstrip('@')}",
                            "a case would get two values for one field",
                            f"keep one of {a!r} and {b!r}",
                        )


def axis_values(name: str, raw: Any) -> list[tuple[str, Any]]:
    """The (label, value) pairs of axis ``name`` as written in the grid (a list; ``slos`` also a mapping).

    Raises:
        InputError: not a list (or mapping for ``slos``), or an empty one ("empty product").
    """
    if name == "slos" and isinstance(raw, dict):
        pairs = [(str(k), v) for k, v in raw.items()]
    elif isinstance(raw, list):
        pairs = [(label(name, v), v) for v in raw]
    else:
        raise InputError(
            f"axis {name!r} must be a list of values, got {type(raw).__name__}",
            fix=f"write e.g. {name}: [a, b]" + (" (or a mapping of tier name to SLO block)" if name == "slos" else ""),
        )
    if not pairs:
        raise InputError(f"empty product: axis {name!r} has no values", fix=f"give {name!r} a value, or drop it")
    seen: dict[str, int] = {}
    out = []
    for lab, value in pairs:
        seen[lab] = seen.get(lab, 0) + 1
        out.append((lab if seen[lab] == 1 else f"{lab}#{seen[lab]}", value))
    return out


def label(name: str, value: Any) -> str:
    """A short text for an axis value, used in the table's ``axes`` column and in the report."""
    if isinstance(value, bool):
        return str(value).lower()
    if name in ("scenarios", "traces", "prices") and isinstance(value, str):
        return Path(value).stem
    if name == "models" and isinstance(value, str) and value.endswith(".json"):
        return Path(value).parent.name or Path(value).stem
    if name == "workloads":
        if isinstance(value, str):
            return Path(value).stem
        if isinstance(value, dict):
            syn = value.get("synthetic")
            if isinstance(syn, dict):
                return f"{syn.get('class', 'balanced')}@{syn.get('rate_per_s')}"
            if isinstance(value.get("path"), str):
                return Path(value["path"]).stem
    if name == "slos" and isinstance(value, dict):
        if "name" in value:
            return str(value["name"])
        return "/".join(str(value[k]) for k in ("ttft", "tpot", "percentile") if k in value) or "default-slo"
    if isinstance(value, list):
        return "+".join(str(v) for v in value)
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items())
    return f"{value:g}" if isinstance(value, float) else str(value)


def _path(value: Any, axis: str, folder: Path) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"axis {axis!r}: {value!r} is not a file path", fix=f"give {axis!r} file paths")
    path = Path(value)
    return str(path if path.is_absolute() else (folder / path).resolve())


def apply(name: str, value: Any, doc: dict[str, Any], options: CaseOptions, folder: Path) -> None:
    """Write axis ``name``'s ``value`` into the scenario fields ``doc`` or the plan ``options`` (``strategy``,
    ``engine``, ``policy``); paths are made absolute against the grid's ``folder``.

    Raises:
        InputError: a value of the wrong kind for the axis (the message names the axis).
    """
    if name == "models":
        if not isinstance(value, str):
            raise InputError(f"axis 'models': {value!r} is not a model name", fix="give catalog names or paths")
        local = folder / value
        doc["model"] = str(local.resolve()) if local.exists() else value
    elif name == "traces":
        doc["workload"] = {"path": _path(value, name, folder)}
    elif name == "workloads":
        if isinstance(value, str):
            doc["workload"] = {"path": _path(value, name, folder)}
        elif isinstance(value, dict):
            block = dict(value)
            if isinstance(block.get("path"), str):
                block["path"] = _path(block["path"], name, folder)
            doc["workload"] = block
        else:
            raise InputError(
                f"axis 'workloads': {value!r} is neither a path nor a workload block",
                fix="give trace paths or blocks like {synthetic: {class: balanced, rate_per_s: 4}}",
            )
    elif name == "slos":
        if not isinstance(value, dict):
            raise InputError(f"axis 'slos': {value!r} is not an SLO block", fix="write {ttft: 2s, tpot: 100ms}")
        doc["slo"] = {k: v for k, v in value.items() if k != "name"}
    elif name in ("ttfts", "tpots", "percentiles"):
        doc.setdefault("slo", {})[name[:-1]] = value
    elif name == "prices":
        doc["prices"] = _path(value, name, folder)
    elif name in ("strategies", "engines", "policies"):
        if not isinstance(value, str):
            raise InputError(f"axis {name!r}: {value!r} is not a name", fix=f"give {name!r} names")
        if name == "strategies":
            options.strategy = value.strip().lower()
        elif name == "engines":
            options.engine = value.strip().lower()
        else:
            options.policy = value.strip().lower()
    else:
        doc[AXES[name].fields[0]] = value


__all__ = [
    "AXES",
    "ENGINES",
    "NOT_PLANNER_FEATURES",
    "CaseOptions",
    "QUESTION_AXES",
    "SERVED_AXES",
    "Axis",
    "apply",
    "axis_values",
    "check_axis_name",
    "check_conflicts",
    "label",
    "overlaps",
]
