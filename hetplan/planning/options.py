"""What ``hetplan plan`` was asked, as one value: :class:`PlanOptions`, built by the CLI from its flags (or by an
API caller) and passed to :func:`hetplan.api.plan_with` and on down, whole, to
:func:`hetplan.planning.pipeline.plan` and :func:`hetplan.planning.verify.plan_verified`, beside the other two
values a plan is made with: the :class:`~hetplan.catalog.context.Catalog` (GPUs, models, prices, fitted curves)
and the :class:`~hetplan.resources.Resources` / :class:`~hetplan.solvers.milp.SolveSettings` (processes, solver
threads).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetplan.perf.error_bands import DEFAULT_CONFIDENCE


@dataclass(frozen=True)
class PlanOptions:
    """The options of one plan besides its scenario.

    Attributes:
        strategy: ``cauchy``, ``homogeneous``, ``melange``, ``mixed`` or ``all`` (:mod:`hetplan.planning.pipeline`).
        analysis: add the price sensitivity and cost-versus-goodput block (extra MILP solves).
        verify: replay the workload through the plan in the simulator (:func:`hetplan.api.plan_verified`);
            ``policy``, ``resize``, ``confidence`` and ``confidence_gates`` apply only then.
        policy: the simulated scheduling policy (``fcfs``, ``sjf``, ``edf``, ``cascade``).
        resize: re-plan for more demand until the simulation holds the SLOs.
        confidence: check the plan against the model's own error at this level (``p80``; None: no check).
        confidence_gates: a plan that does not hold at ``confidence`` is not verified (re-sizing sizes for it).
        profiles: ``hetplan profile`` files whose measured figures replace their GPUs' datasheet entries.
        prune_with / prune_top_k / min_r2: an A1/A2 fit file, the heterogeneous pairs it keeps and the R² below
            which the plan warns (None: the pipeline's defaults).
        price_factors: GPU name -> factor on every price of that GPU (``hetplan explore``'s ``price:`` axis).
    """

    strategy: str = "cauchy"
    analysis: bool = True
    verify: bool = False
    policy: str = "fcfs"
    resize: bool = True
    confidence: str | None = DEFAULT_CONFIDENCE
    confidence_gates: bool = False
    profiles: tuple[Path, ...] = ()
    prune_with: Path | None = None
    prune_top_k: int | None = None
    min_r2: float | None = None
    price_factors: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, price_factors: Mapping[str, float] | None = None, **fields: Any) -> PlanOptions:
        """Options from keyword fields, ``price_factors`` as a mapping (sorted into the value)."""
        return cls(price_factors=tuple(sorted((price_factors or {}).items())), **fields)


__all__ = [
    "PlanOptions",
]
