"""The types of a report's decision block (:class:`Decision`, built by :mod:`hetplan.report.decision`): the best
single-GPU-type fleet, what each GPU type does, prices, purchases and owned GPUs, each with its JSON form
(:class:`~hetplan.report.docmodel.DocModel`) in the report document's key order.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from hetplan.plan.deployment import Purchase
from hetplan.report.docmodel import DocModel, plain


@dataclass(frozen=True)
class BestSingleType(DocModel):
    """The best single-GPU-type fleet (the homogeneous baseline) against the plan: ``status`` "this plan" (the
    plan is it), "infeasible" (with ``reason``), or the baseline's status with its $/hour, GPU and
    ``saved_fraction`` (1 - plan cost / its cost)."""

    status: str
    usd_per_hour: float | None = None
    gpu: str | None = None
    reason: str | None = None
    saved_fraction: float | None = None

    def to_doc(self) -> dict[str, Any]:
        """The JSON form of each case."""
        if self.status == "this plan":
            return {"status": self.status, "usd_per_hour": self.usd_per_hour, "gpu": self.gpu}
        if self.status == "infeasible":
            return {"status": self.status, "reason": self.reason}
        return {"status": self.status, "usd_per_hour": self.usd_per_hour, "gpu": self.gpu,
                "saved_fraction": self.saved_fraction}  # fmt: skip


@dataclass(frozen=True)
class GpuRole(DocModel):
    """What one GPU type does: GPUs per role (prefill, decode, aggregated; in the order first met) and in words."""

    gpu: str
    counts: tuple[tuple[str, int], ...]
    text: str

    def to_doc(self) -> dict[str, Any]:
        """``{"gpu": ..., "prefill": n, "decode": m, "text": ...}``."""
        return {"gpu": self.gpu, **dict(self.counts), "text": self.text}


@dataclass(frozen=True)
class PriceRow(DocModel):
    """A GPU type the plan uses: its $/GPU-hour and source, GPUs used; when bought as instances, what they cost
    per GPU-hour and which (``bought_as``)."""

    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset({"usd_per_gpu_hour_bought", "bought_as"})

    gpu: str
    usd_per_gpu_hour: float
    gpus: int
    source: str
    usd_per_gpu_hour_bought: float | None = None
    bought_as: tuple[str, ...] | None = None


@dataclass(frozen=True)
class OwnedRow(DocModel):
    """One owned GPU type's use: GPUs ``owned``, ``used``, ``idle`` and why idle; ``doc``: the row as written."""

    gpu: str
    owned: Any
    used: Any
    idle: Any
    idle_reason: str | None
    doc: Mapping[str, Any]

    def to_doc(self) -> dict[str, Any]:
        """The plan's ``owned_gpus`` row with its GPU first."""
        return dict(self.doc)


@dataclass(frozen=True)
class Decision(DocModel):
    """A plan's first block: the recommendation sentence, the verification status and verdict, the best
    single-GPU-type fleet, what each GPU type does, prices, purchases, quality changes, owned GPUs (None when the
    plan owns none)."""

    sentence: str
    status: str
    verdict: str
    best_single_gpu_type: BestSingleType | None
    gpu_roles: tuple[GpuRole, ...]
    prices: tuple[PriceRow, ...]
    purchase: tuple[Purchase, ...]
    quality: tuple[str, ...]
    owned: tuple[OwnedRow, ...] | None = None

    def to_doc(self) -> dict[str, Any]:
        """The JSON form (``owned`` only for plans with owned GPUs)."""
        best = self.best_single_gpu_type
        out = {
            "sentence": self.sentence,
            "status": self.status,
            "verdict": self.verdict,
            "best_single_gpu_type": None if best is None else best.to_doc(),
            "gpu_roles": plain(self.gpu_roles),
            "prices": plain(self.prices),
            "purchase": [dataclasses.asdict(line) for line in self.purchase],
            "quality": list(self.quality),
        }
        if self.owned is not None:
            out["owned"] = plain(self.owned)
        return out


__all__ = ["BestSingleType", "Decision", "GpuRole", "OwnedRow", "PriceRow"]
