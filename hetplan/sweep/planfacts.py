"""What a sweep reads from a plan document (a worker's ``api.to_doc`` or a plan file ``--resume`` reuses): the
deployment, costs, capacity, where the prices came from, the simulated check and the ``sweep_case`` record, as
typed records (:class:`PlanFacts`, :class:`Deployment`). The plan document is read once, here, at the file edge;
other fields are ignored.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from hetplan.plan.deployment import combo_label


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Combo(_Model):
    count: int
    n_prefill: int
    prefill_gpu: str
    prefill_tp: int
    n_decode: int
    decode_gpu: str
    decode_tp: int


class _Instance(_Model):
    count: int
    gpu: str
    tp: int


class _Price(_Model):
    source: Any = ""


class _Slo(_Model):
    percentile: float


class _PlanScenario(_Model):
    prices: dict[str, _Price] | None = None
    slo: _Slo | None = None


class _Attainment(_Model):
    joint: float | None = None


class _Verification(BaseModel):
    """The plan's ``verification`` block (older blocks: ``attainment`` a map with ``joint``, and the quantiles
    under ``ttft_p90_s``-style names, kept in the extra fields)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    attainment: float | _Attainment | None = None
    goodput_req_per_s: float | None = None
    ttft_p_s: float | None = None
    tpot_p_s: float | None = None
    misses: list[Any] | None = None

    def joint_attainment(self) -> float | None:
        """The joint SLO attainment (older blocks: ``attainment`` a map with ``joint``)."""
        att = self.attainment
        return att.joint if isinstance(att, _Attainment) else att

    def legacy(self, name: str) -> float | None:
        """An older block's quantile field ``name`` (``ttft_p90_s``), if there."""
        value = (self.model_extra or {}).get(name)
        return None if value is None else float(value)


class _SweepRecord(_Model):
    """The ``sweep_case`` block: the inputs hash ``--resume`` matches and the simulated check's error, if any."""

    inputs_sha256: str | None = None
    verify_error: str | None = None


class Deployment(_Model):
    """A plan document's deployment: its combos and aggregated instances."""

    combos: list[_Combo] | None = None
    instances: list[_Instance] | None = None


class PlanFacts(Deployment):
    """What a row reads from a plan document (the plan file's field names; other fields ignored).

    Raises (from ``model_validate``):
        pydantic.ValidationError: a plan document with a field of the wrong kind (a hand-edited plan file).
    """

    status: str = ""
    total_usd_per_hour: float | None = None
    usd_per_month: float | None = None
    tokens_per_usd: float | None = None
    goodput_req_per_s: float | None = None
    gain_over_homogeneous: float | None = None
    gpus_used: dict[str, int | float] | None = None
    warnings: list[Any] | None = None
    scenario: _PlanScenario = Field(default_factory=_PlanScenario)
    sweep_case: _SweepRecord | None = None
    verification: _Verification | None = None


def units(plan: Deployment) -> str:
    """The deployment in one line (the ``chosen_units`` column; see :func:`hetplan.sweep.table.chosen_units`)."""
    parts = []
    for c in plan.combos or []:
        label = combo_label(c.n_prefill, c.prefill_gpu, c.prefill_tp, c.n_decode, c.decode_gpu, c.decode_tp)
        parts.append(f"{c.count}x [{label}]")
    for t in plan.instances or []:
        parts.append(f"{t.count}x {t.gpu} TP{t.tp}")
    return "; ".join(parts)


__all__ = ["Deployment", "PlanFacts", "units"]
