"""The cost gate's results: one :class:`GateResult` per scenario compared, ``hetplan gate --json``'s
:class:`GateRun` and a report's ``gate`` block (:class:`GateSummary`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from hetplan.report.docmodel import DocModel


@dataclass(frozen=True)
class GateResult(DocModel):
    """Outcome of one comparison. ``cost_change`` (a fraction) and ``tokens_per_usd_ratio`` are relative to the
    baseline; both are NaN where not defined (a $0.00/h baseline for the fraction, a $0.00/h plan on either side for
    the ratio, a scenario not compared for both). ``cost_change_usd_per_hour`` is the rise in dollars per hour."""

    name: str
    passed: bool
    baseline_usd_per_hour: float
    usd_per_hour: float
    cost_change: float
    tokens_per_usd_ratio: float
    failures: tuple[str, ...] = ()
    changes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cost_change_usd_per_hour(self) -> float:
        """``usd_per_hour - baseline_usd_per_hour`` (NaN when not compared)."""
        return self.usd_per_hour - self.baseline_usd_per_hour

    def change_text(self) -> str:
        """The cost change in words: ``+1.25 %``, or ``+$3.00/h`` from a $0.00/h baseline (no percentage)."""
        if math.isnan(self.cost_change):
            rise = self.cost_change_usd_per_hour
            return f"{'-' if rise < 0 else '+'}${abs(rise):,.2f}/h from $0.00/h"
        return f"{self.cost_change * 100:+.2f} %"

    def ratio_text(self) -> str:
        """``0.9800x``, or ``-`` where tokens/USD is not defined (a plan at $0.00/h)."""
        return "-" if math.isnan(self.tokens_per_usd_ratio) else f"{self.tokens_per_usd_ratio:.4f}x"

    def to_doc(self) -> dict[str, Any]:
        """The JSON form (``gate --json``, a report's ``gate.results``): money rounded to 6 places, NaN as null."""

        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6) + 0.0

        return {
            "name": self.name,
            "passed": self.passed,
            "baseline_usd_per_hour": num(self.baseline_usd_per_hour),
            "usd_per_hour": num(self.usd_per_hour),
            "cost_change_fraction": num(self.cost_change),
            "cost_change_usd_per_hour": num(self.cost_change_usd_per_hour),
            "tokens_per_usd_ratio": num(self.tokens_per_usd_ratio),
            "failures": list(self.failures),
            "changes": list(self.changes),
        }

    def as_dict(self) -> dict[str, Any]:
        """Same as :meth:`to_doc` (the name callers used before the typed report)."""
        return self.to_doc()


@dataclass(frozen=True)
class GateRun(DocModel):
    """``hetplan gate --json``: whether every scenario passed, each result, and the warnings."""

    passed: bool
    results: tuple[GateResult, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class GateSummary(DocModel):
    """A report's ``gate`` block (``hetplan report --baseline``): the baseline file, the allowances (a fraction of
    the baseline's $/hour, dollars per hour, the tokens/USD ratio or None), each result and whether all passed."""

    baseline: str
    max_cost_increase_fraction: float
    max_cost_increase_usd_per_hour: float
    min_tokens_per_usd_ratio: float | None
    results: tuple[GateResult, ...]
    passed: bool
