"""Prompt-length routing rules: the one rule table the simulator's router and the emitted routers share.

A router in front of a deployment sees a request's prompt (it can count its tokens) but never its output length.
So a plan's traffic split is a table of **prompt ranges**, each with a weight per routing unit (a combo with all
its copies, or an aggregated instance type, in plan order: combos first, then instance types):

- a Cauchy or homogeneous plan has no ranges: every prompt goes over every unit, weighted by the unit's planned
  goodput (all copies);
- a Mélange or mixed plan's MILP assigns request-size buckets (prompt range × output range) to units. Its table
  has one range per prompt bucket, and a unit's weight there is the sum of its shares of that prompt bucket's
  buckets over all output ranges. A request of that prompt range goes to a unit in proportion to those weights
  whatever its output: each unit gets the output mix its prompt ranges really have, not the output buckets the
  MILP sized it for (the verification replays exactly that). Prompts outside every range (and ranges no unit
  serves) use the default weights (the units' traffic shares).

Inside a range the pick is smooth weighted round-robin (nginx's algorithm: deterministic, each target's turns
spread evenly), one counter set per range: :class:`WeightedRoundRobin`, which :func:`route` and the simulator's
``round-robin`` router (:mod:`hetplan.sim.router`) both use. ``hetplan emit`` writes the table as
``routing.json`` (:meth:`RoutingTable.to_doc`); :meth:`RoutingTable.from_doc` reads it back, so a test can hold
the emitted rule and the simulated one to identical assignments.

Source: hetplan's own reconstruction (Mélange, Griggs et al. 2024, assigns request-size buckets to GPU types; a
deployable router can only read the prompt).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.plan.types import Plan

RULES_KIND = "hetplan-routing-rules"
RULES_SCHEMA_VERSION = 1

Bucket = tuple[float, float, float, float, float]
"""``(prompt_lo, prompt_hi, output_lo, output_hi, share)``: a request-size bucket a unit serves (tokens; ``hi``
exclusive, ``inf`` open-ended) and the share of all traffic (0-1) it takes from it."""


@dataclass(frozen=True)
class PromptRange:
    """Prompts of ``lo_tokens`` <= length < ``hi_tokens`` (None: no upper end) go to unit ``k`` with weight
    ``weights[k]`` (0: never)."""

    lo_tokens: int
    hi_tokens: int | None
    weights: tuple[float, ...]

    def holds(self, prompt_tokens: int) -> bool:
        """Whether a prompt of ``prompt_tokens`` falls in this range."""
        return self.lo_tokens <= prompt_tokens and (self.hi_tokens is None or prompt_tokens < self.hi_tokens)


@dataclass(frozen=True)
class RoutingTable:
    """Prompt ranges (sorted, disjoint) with a weight per unit each, and the default weights of prompts outside
    every range (module docstring). ``units``: the unit labels, in plan order."""

    units: tuple[str, ...]
    ranges: tuple[PromptRange, ...]
    default: tuple[float, ...]

    def __post_init__(self) -> None:
        n = len(self.units)
        if len(self.default) != n or any(len(r.weights) != n for r in self.ranges):
            raise InputError("routing rules: every weight list needs one weight per unit", fix="re-emit the plan")
        los = [r.lo_tokens for r in self.ranges]
        for a, b in zip(self.ranges, self.ranges[1:], strict=False):
            if a.hi_tokens is None or a.hi_tokens > b.lo_tokens:
                raise InputError("routing rules: prompt ranges overlap or are unsorted", fix="re-emit the plan")
        object.__setattr__(self, "_los", los)

    def range_index(self, prompt_tokens: int) -> int:
        """Index of the range holding ``prompt_tokens``, or -1 (the default weights)."""
        k = bisect.bisect_right(self._los, prompt_tokens) - 1  # type: ignore[attr-defined]
        return k if k >= 0 and self.ranges[k].holds(prompt_tokens) else -1

    def weights(self, index: int) -> tuple[float, ...]:
        """The weights of range ``index`` (-1: the default ones)."""
        return self.default if index < 0 else self.ranges[index].weights

    def to_doc(self) -> dict[str, Any]:
        """The table as a plain, JSON-ready document (``hetplan emit``'s ``routing.json``); weights are written
        exactly (``float`` repr), so :meth:`from_doc` gives back an equal table."""
        return {
            "kind": RULES_KIND,
            "schema_version": RULES_SCHEMA_VERSION,
            "rule": "count the prompt's tokens with the model's tokenizer; take the range with lo_tokens <= n < "
            "hi_tokens (null: no upper end), else the default weights; pick among the units with weight > 0 by "
            "smooth weighted round-robin (nginx), one counter set per range",
            "units": list(self.units),
            "default_weights": list(self.default),
            "ranges": [
                {"lo_tokens": r.lo_tokens, "hi_tokens": r.hi_tokens, "weights": list(r.weights)} for r in self.ranges
            ],
        }

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> RoutingTable:
        """Read a :meth:`to_doc` document back.

        Raises:
            InputError: not a routing-rules document, or weights that do not match the units.
        """
        if doc.get("kind") != RULES_KIND:
            raise InputError(f"not a {RULES_KIND} document (kind {doc.get('kind')!r})", fix="pass routing.json")
        try:
            ranges = tuple(
                PromptRange(
                    int(r["lo_tokens"]),
                    None if r["hi_tokens"] is None else int(r["hi_tokens"]),
                    tuple(float(w) for w in r["weights"]),
                )  # fmt: skip
                for r in doc["ranges"]
            )
            return cls(tuple(str(u) for u in doc["units"]), ranges, tuple(float(w) for w in doc["default_weights"]))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"routing rules: bad document ({e})", fix="re-emit the plan") from None


def _tokens(x: float) -> int:
    """A bucket edge as the smallest whole prompt length at or above it."""
    return int(math.ceil(x))


def table_from_units(
    labels: Sequence[str], weights: Sequence[float], buckets: Sequence[Sequence[Bucket]]
) -> RoutingTable:
    """The rule table of units with default ``weights`` and Mélange ``buckets`` (one list per unit, empty for a
    unit without buckets): see the module docstring.

    Shapes: ``labels``, ``weights`` and ``buckets`` have one entry per unit."""
    edges = sorted({_tokens(b[0]) for bs in buckets for b in bs} | {_tokens(b[1]) for bs in buckets for b in bs
                                                                     if math.isfinite(b[1])})  # fmt: skip
    open_end = any(not math.isfinite(b[1]) for bs in buckets for b in bs)
    bounds: list[tuple[int, int | None]] = list(zip(edges, edges[1:], strict=False))
    if open_end and edges:
        bounds.append((edges[-1], None))
    ranges = []
    for lo, hi in bounds:
        w = tuple(
            float(sum(b[4] for b in bs if _tokens(b[0]) <= lo and (not math.isfinite(b[1]) or (
                hi is not None and hi <= _tokens(b[1]))) and b[4] > 0))
            for bs in buckets
        )  # fmt: skip
        if any(x > 0 for x in w):
            ranges.append(PromptRange(lo, hi, w))
    return RoutingTable(tuple(labels), tuple(ranges), tuple(float(x) for x in weights))


def table_from_plan(plan: Plan) -> RoutingTable:
    """The rule table of a :class:`~hetplan.plan.types.Plan`: its combos (default weight: goodput of all copies)
    then its aggregated instance types (default weight: traffic share), with their Mélange buckets."""
    labels: list[str] = []
    weights: list[float] = []
    buckets: list[list[Bucket]] = []
    for c in plan.combos:
        labels.append(f"{c.label} x{c.count}" if c.count > 1 else c.label)
        weights.append(c.goodput_req_per_s * c.count)
        buckets.append([(b.prompt_lo_tokens, b.prompt_hi_tokens, b.output_lo_tokens, b.output_hi_tokens, b.share)
                        for b in c.buckets])  # fmt: skip
    for t in plan.instances:
        labels.append(f"{t.count}x {t.gpu} TP{t.tp}")
        weights.append(t.traffic_share or 1e-9)
        buckets.append([(b.prompt_lo_tokens, b.prompt_hi_tokens, b.output_lo_tokens, b.output_hi_tokens, b.share)
                        for b in t.buckets])  # fmt: skip
    return table_from_units(labels, weights, buckets)


class WeightedRoundRobin:
    """Smooth weighted round-robin over a table's ranges (one counter set per range; deterministic)."""

    def __init__(self, table: RoutingTable) -> None:
        self.table = table
        self.state: dict[int, list[float]] = {}

    def pick(self, index: int) -> int:
        """The unit for the next request of range ``index`` (-1: default weights)."""
        weights = self.table.weights(index)
        cands = [k for k, w in enumerate(weights) if w > 0] if index >= 0 else list(range(len(weights)))
        if len(cands) == 1:
            return cands[0]
        state = self.state.setdefault(index, [0.0] * len(cands))
        total = 0.0
        best = 0
        for k, u in enumerate(cands):
            w = weights[u]
            total += w
            state[k] += w
            if state[k] > state[best]:
                best = k
        state[best] -= total
        return cands[best]


def route(table: RoutingTable, prompt_tokens: Sequence[int]) -> list[int]:
    """The unit of each request of ``prompt_tokens`` (in arrival order) under ``table`` with smooth weighted
    round-robin: what a front router implementing ``routing.json`` does."""
    rr = WeightedRoundRobin(table)
    return [rr.pick(table.range_index(int(p))) for p in prompt_tokens]


__all__ = [
    "Bucket",
    "PromptRange",
    "RULES_KIND",
    "RoutingTable",
    "WeightedRoundRobin",
    "route",
    "table_from_plan",
    "table_from_units",
]
