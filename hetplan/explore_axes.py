"""The axes of ``hetplan explore`` (:mod:`hetplan.explore`): ``--vary NAME=V1,V2,...`` read into an :class:`Axis`
of :class:`Value` s, and the points of one or two axes over a scenario (:func:`build_points`), each a validated
scenario. The axes and what their values mean are in :mod:`hetplan.explore`'s docstring.

Source: hetplan's own.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hetplan.errors import InputError
from hetplan.units import parse_duration_s
from hetplan.workload.classes import check_slo_override

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.scenario import Scenario

#: The axes and what they accept (for messages).
AXES = {
    "goodput": "1x,1.5x,2x (times the target), +50%, or req/s",
    "ttft": "durations, e.g. 1s,2s,5s",
    "tpot": "durations, e.g. 50ms,100ms",
    "price:GPU": "-20%,+10% or 0.8x (every price of that GPU)",
    "owned:GPU": "+4,+8 (more owned) or counts 4,12",
}
MAX_AXES = 2
#: Most points one command plans (a work budget: about a second or two each on the bundled examples).
MAX_POINTS = 64
_FACTOR = re.compile(r"^([0-9]*\.?[0-9]+)\s*x$", re.ASCII)
_PERCENT = re.compile(r"^([+-])\s*([0-9]*\.?[0-9]+)\s*%$", re.ASCII)
_NUMBER = re.compile(r"^[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?$", re.ASCII)  # 7.5 or 2e4 req/s
_DELTA = re.compile(r"^([+-])\s*([0-9]+)$", re.ASCII)


@dataclass(frozen=True)
class Value:
    """One value of an axis: its ``label`` as written and what it sets (``kind``: ``factor``, ``absolute``,
    ``delta`` or ``seconds``; ``number``)."""

    label: str
    kind: str
    number: float


@dataclass(frozen=True)
class Axis:
    """One ``--vary`` axis: ``name`` (``goodput``, ``ttft``, ``tpot``, ``price``, ``owned``), ``gpu`` (for
    ``price``/``owned``, as written), the text as given and its values."""

    name: str
    gpu: str | None
    text: str
    values: tuple[Value, ...]

    @property
    def title(self) -> str:
        """``goodput`` or ``price:L40S``."""
        return self.name if self.gpu is None else f"{self.name}:{self.gpu}"


def _bad(axis: str, item: str, expected: str) -> InputError:
    return InputError(f"--vary {axis}: cannot read {item!r}", f"expected {expected}", f"write e.g. {_EXAMPLE[axis]}")


_EXAMPLE = {
    "goodput": "--vary goodput=1x,1.5x,2x",
    "ttft": "--vary ttft=1s,2s,5s",
    "tpot": "--vary tpot=50ms,100ms",
    "price": "--vary price:L40S=-20%,+20%",
    "owned": "--vary owned:L40S=+4,+8",
}


def _factor(axis: str, item: str, expected: str, allow_number: bool) -> Value:
    """``1.5x``, ``+50%``/``-20%`` as a factor; a bare number as an absolute value when ``allow_number``."""
    m = _FACTOR.match(item)
    if m:
        f = float(m.group(1))
    elif (p := _PERCENT.match(item)) is not None:
        f = 1.0 + (1 if p.group(1) == "+" else -1) * float(p.group(2)) / 100.0
    elif allow_number and _NUMBER.match(item):
        v = float(item)
        if not (v > 0 and math.isfinite(v)):
            raise InputError(
                f"--vary {axis}: {item!r} is not a positive finite number", fix=f"write e.g. {_EXAMPLE[axis]}"
            )
        return Value(item, "absolute", v)
    else:
        raise _bad(axis, item, expected)
    if not f > 0:
        raise InputError(
            f"--vary {axis}: {item!r} makes a factor of {f:g}",
            "a factor must be above 0",
            f"write e.g. {_EXAMPLE[axis]}",
        )
    return Value(item, "factor", f)


def parse_axis(text: str) -> Axis:
    """One ``--vary`` value, ``NAME=V1,V2,...`` (module docstring).

    Raises:
        InputError: no ``=``, an unknown axis (with the known ones), a missing GPU name, an empty list, a value the
            axis cannot read or one given twice; the message names the axis and the value.
    """
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep:
        raise InputError(f"--vary {text!r}: expected NAME=V1,V2,...", fix="write e.g. --vary goodput=1x,1.5x,2x")
    base, colon, gpu = name.partition(":")
    base = base.strip().lower()
    if base not in _EXAMPLE:
        import difflib

        close = difflib.get_close_matches(base, list(_EXAMPLE), n=1)
        raise InputError(
            f"--vary: unknown axis {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""),
            "the axes are: " + "; ".join(f"{k} ({v})" for k, v in AXES.items()),
            "pick one of them",
        )
    if base in ("price", "owned") and not (colon and gpu.strip()):
        raise InputError(f"--vary {base}: no GPU named", f"{base} moves one GPU type", f"write e.g. {_EXAMPLE[base]}")
    if base not in ("price", "owned") and colon:
        raise InputError(f"--vary {name}: {base} takes no GPU", fix=f"write e.g. {_EXAMPLE[base]}")
    items = [x.strip() for x in rest.split(",") if x.strip()]
    if not items:
        raise InputError(f"--vary {name}: no values", fix=f"write e.g. {_EXAMPLE[base]}")
    values: list[Value] = []
    for item in items:
        if base == "goodput":
            values.append(_factor(base, item, "a factor (1.5x), a signed percent (+50%) or req/s (7.5)", True))
        elif base in ("ttft", "tpot"):
            try:
                seconds = parse_duration_s(item, base)
            except InputError as exc:
                raise InputError(f"--vary {base}: {exc.what}", exc.why, f"write e.g. {_EXAMPLE[base]}") from None
            values.append(Value(item, "seconds", seconds))
        elif base == "price":
            values.append(_factor(base, item, "a signed percent (-20%) or a factor (0.8x)", False))
        else:
            d = _DELTA.match(item)
            if d is not None:
                values.append(Value(item, "delta", (1 if d.group(1) == "+" else -1) * float(d.group(2))))
            elif item.isascii() and item.isdigit():
                values.append(Value(item, "absolute", float(item)))
            else:
                raise _bad(base, item, "a change (+4, -8) or a count of owned GPUs (12)")
    seen = [v.label for v in values]
    twice = sorted({s for s in seen if seen.count(s) > 1})
    if twice:
        raise InputError(f"--vary {name}: {twice[0]} given twice", fix="give each value once")
    return Axis(base, gpu.strip() or None, text, tuple(values))


def parse_axes(texts: list[str]) -> list[Axis]:
    """The ``--vary`` axes (one or two, different names).

    Raises:
        InputError: none, more than two, the same axis twice, more than :data:`MAX_POINTS` points, or a bad axis.
    """
    if not texts:
        raise InputError("explore needs an axis", fix="pass e.g. --vary goodput=1x,1.5x,2x")
    if len(texts) > MAX_AXES:
        raise InputError(
            f"--vary given {len(texts)} times", f"explore varies at most {MAX_AXES} axes (a curve or a table)",
            "keep two --vary, or use hetplan sweep for a larger grid",
        )  # fmt: skip
    axes = [parse_axis(t) for t in texts]
    if len(axes) == 2 and axes[0].title.lower() == axes[1].title.lower():
        raise InputError(f"--vary {axes[0].title} given twice", fix="give each axis once, its values comma-separated")
    points = 1
    for a in axes:
        points *= len(a.values)
    if points > MAX_POINTS:
        raise InputError(
            f"--vary: {points} points", f"explore plans at most {MAX_POINTS}",
            "give fewer values, or use hetplan sweep for a grid",
        )  # fmt: skip
    return axes


@dataclass(frozen=True)
class Point:
    """One point: its values (axis title -> label), the scenario it plans and the price factors it applies."""

    labels: tuple[tuple[str, str], ...]
    scenario: Scenario
    price_factors: tuple[tuple[str, float], ...]
    shown: str


def _canonical(gpu: str, axis: str, catalog: Catalog) -> str:
    try:
        return catalog.find_gpu(gpu).name
    except InputError as exc:
        raise InputError(f"--vary {axis}:{gpu}: {exc.what}", exc.why, exc.fix) from None


def build_points(base: Scenario, axes: list[Axis], catalog: Catalog | None = None) -> tuple[list[Point], float]:
    """The points of ``axes`` over ``base``, each validated (a product, the first axis varying slowest), and the
    goodput target ``goodput=1x`` means (the scenario's, else the workload's mean rate; req/s); GPU names are
    looked up in ``catalog`` (None: the shipped catalogs).

    Builds ``base``'s request once (:func:`hetplan.planning.request.build_request`) for the goodput target and
    the candidate GPUs.

    Raises:
        InputError: the scenario is invalid, a ``price``/``owned`` GPU is unknown or not a candidate, an ``owned``
            count below 0, or a point's scenario the schema refuses (each names the axis and value).
    """
    from pydantic import ValidationError

    from hetplan.catalog.context import Catalog
    from hetplan.catalog.loader import format_validation
    from hetplan.planning.request import build_request
    from hetplan.scenario import Scenario

    catalog = catalog or Catalog.shipped()
    req, _, _, _ = build_request(base, catalog=catalog)
    target = req.goodput_req_per_s
    owned_now: dict[str, int] = {}
    for name, n in base.inventory.items():
        owned_now[_canonical(name, "owned", catalog)] = int(n)
    for a in axes:
        if a.gpu is not None:
            gpu = _canonical(a.gpu, a.name, catalog)
            if gpu not in req.prices:
                raise InputError(
                    f"--vary {a.name}:{a.gpu}: {gpu} is not a candidate GPU of {base.name}",
                    f"the candidates are {', '.join(sorted(req.prices))}",
                    "name one of them, or add the GPU to the scenario's gpus",
                )
    points = []
    for combo in itertools.product(*(a.values for a in axes)):
        doc = base.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
        doc.setdefault("slo", {})
        factors: dict[str, float] = {}
        shown = []
        for a, v in zip(axes, combo, strict=True):
            if a.name == "goodput":
                rate = v.number if v.kind == "absolute" else target * v.number
                doc["goodput_req_per_s"] = rate
                shown.append(f"{a.title}={v.label}" + ("" if v.kind == "absolute" else f" ({rate:.4g} req/s)"))
                continue
            if a.name in ("ttft", "tpot"):
                check_slo_override(doc.get("classes"), a.name, f"--vary {a.name}")
                doc["slo"][a.name] = v.label
            elif a.name == "price":
                factors[_canonical(a.gpu or "", a.name, catalog)] = v.number
            else:
                gpu = _canonical(a.gpu or "", a.name, catalog)
                inv = {_canonical(k, "owned", catalog): int(n) for k, n in doc.get("inventory", {}).items()}
                count = int(v.number) if v.kind == "absolute" else owned_now.get(gpu, 0) + int(v.number)
                if count < 0:
                    raise InputError(
                        f"--vary owned:{a.gpu}={v.label}: {count} owned",
                        f"the scenario owns {owned_now.get(gpu, 0)}",
                        "give a change that leaves 0 or more",
                    )
                inv[gpu] = count
                doc["inventory"] = inv
                if v.kind == "delta":
                    shown.append(f"{a.title}={v.label} ({count})")
                    continue
            shown.append(f"{a.title}={v.label}")
        try:
            sc = Scenario.model_validate(doc).with_base_dir(base.base_dir)
        except ValidationError as exc:
            where = ", ".join(shown)
            raise InputError(f"--vary: the point {where} is not a valid scenario", format_validation(exc),
                             "give values inside the field's range") from None  # fmt: skip
        labels = tuple((a.title, v.label) for a, v in zip(axes, combo, strict=True))
        points.append(Point(labels, sc, tuple(sorted(factors.items())), ", ".join(shown)))
    return points, target


__all__ = ["AXES", "MAX_AXES", "MAX_POINTS", "Axis", "Point", "Value", "build_points", "parse_axes", "parse_axis"]
