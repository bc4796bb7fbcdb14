"""Reading plan files written by ``hetplan plan --out`` (YAML or JSON).

The plan document is the one object every later stage reads (emitters, reports, gates): nothing downstream
re-derives what the solver decided. :func:`load_plan` checks the parts those stages rely on and returns the
document as a plain dict, unchanged.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hetplan.catalog.loader import format_validation, read_yaml_file
from hetplan.errors import InputError


class _Open(BaseModel):
    """Any mapping (fields beyond the checked ones are kept)."""

    model_config = ConfigDict(extra="allow")


class ComboDoc(_Open):
    """One combo of a plan: n prefill instances and m decode instances, deployed ``count`` times."""

    prefill_gpu: str
    prefill_tp: int = Field(ge=1)
    n_prefill: int = Field(ge=1)
    decode_gpu: str
    decode_tp: int = Field(ge=1)
    n_decode: int = Field(ge=1)
    count: int = Field(ge=1)
    usd_per_hour: float = Field(ge=0)
    goodput_req_per_s: float = Field(ge=0)
    decode_batch: int = Field(ge=0)


class InstanceDoc(_Open):
    """One aggregated instance type of a Mélange plan: ``count`` instances of ``gpu`` at TP ``tp``."""

    role: str
    gpu: str
    tp: int = Field(ge=1)
    count: int = Field(ge=1)
    usd_per_hour: float = Field(ge=0)


class ScenarioDoc(_Open):
    """The scenario echo inside a plan (model, dtypes, SLOs, prices, engine settings)."""

    name: str
    model: str
    weight_dtype: str
    kv_dtype: str
    slo: dict[str, float]
    prices: dict[str, dict[str, Any]]
    perf_settings: dict[str, Any]


class PlanDoc(_Open):
    """The checked part of a plan document."""

    schema_version: int = Field(ge=1, le=1)
    kind: str = Field(pattern="^plan$")
    strategy: str
    status: str
    scenario: ScenarioDoc
    total_usd_per_hour: float
    goodput_req_per_s: float
    gpus_used: dict[str, int]
    combos: list[ComboDoc] = Field(default_factory=list)
    instances: list[InstanceDoc] = Field(default_factory=list)

    @model_validator(mode="after")
    def _not_empty(self) -> PlanDoc:
        if not self.combos and not self.instances:
            raise ValueError("a plan needs combos (disaggregated) or instances (aggregated)")
        return self


def load_plan(path: str | Path) -> dict[str, Any]:
    """Read a plan file and check its structure.

    Returns:
        The plan document as written (a dict).

    Raises:
        InputError: the file is missing, unreadable, not a plan, or lacks a field that later stages need.
    """
    doc = read_yaml_file(Path(path), _Open, "plan file", "write one with 'hetplan plan ... --out plan.yaml'")
    data = doc.model_dump()
    check_plan(data, str(path))
    return data


def check_plan(data: dict[str, Any], where: str = "plan") -> None:
    """Validate a plan document already in memory (see :class:`PlanDoc`)."""
    try:
        PlanDoc.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"{where} is not a usable hetplan plan",
            format_validation(exc),
            "write one with 'hetplan plan ... --out plan.yaml'",
        ) from None
