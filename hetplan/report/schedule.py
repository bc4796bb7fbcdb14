"""Autoscaling schedules in the report: the part of ``hetplan autoscale --out schedule.json`` the report reads,
checked at the file edge (:func:`check_schedule`), and its report section (:func:`schedule_report`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hetplan.catalog.loader import format_validation
from hetplan.errors import InputError
from hetplan.report.types import ScheduleSection


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


_NonNeg = Annotated[float, Field(ge=0)]


class ScheduleWindowDoc(_Open):
    """One window of a schedule as the report reads it (start in seconds, rates in req/s, cost in $/hour)."""

    window_start_s: _NonNeg
    demand_req_per_s: _NonNeg
    available_capacity_req_per_s: _NonNeg
    usd_per_hour: _NonNeg


class ScheduleSummaryDoc(_Open):
    """A schedule's ``summary`` as the report reads it: counts, a positive window length and span, costs in $."""

    windows: int = Field(ge=1)
    window_s: float = Field(gt=0)
    hours: float = Field(gt=0)
    schedule_usd: _NonNeg
    static_peak_usd: _NonNeg
    static_mean_usd: _NonNeg | None
    static_mean_short_windows: int | None = Field(default=None, ge=0)
    saving_vs_static_peak: float | None
    per_window_optimum_usd: _NonNeg | None
    short_windows: int = Field(ge=0)
    peak_demand_req_per_s: _NonNeg
    mean_demand_req_per_s: _NonNeg
    combo_changes: int = Field(ge=0)
    windows_with_changes: int = Field(ge=0)
    gpu_hours: dict[str, _NonNeg]


class ScheduleCurveDoc(_Open):
    source: str


class ScheduleDoc(_Open):
    """The part of ``hetplan autoscale --out schedule.json`` that reports read (fields beyond it are kept)."""

    kind: Literal["autoscale-schedule"]
    scenario: str
    curve: ScheduleCurveDoc
    settings: dict[str, Any]
    summary: ScheduleSummaryDoc
    windows: list[ScheduleWindowDoc] = Field(min_length=1)
    warnings: list[str] = Field(default_factory=list)


def _parse(doc: Mapping[str, Any], where: str) -> ScheduleDoc:
    try:
        return ScheduleDoc.model_validate(doc)
    except ValidationError as exc:
        raise InputError(
            f"{where} is not a usable schedule",
            format_validation(exc),
            "write one with hetplan autoscale SCENARIO --load-curve FILE --out schedule.json",
        ) from None


def check_schedule(doc: Mapping[str, Any], where: str) -> None:
    """Check a schedule document for everything the report reads (see :class:`ScheduleDoc`).

    Raises:
        InputError: a field missing, of the wrong type, non-finite or out of range (named), e.g. a zero-length
            window or span, or windows without their start, demand, capacity or cost.
    """
    _parse(doc, where)


def schedule_report(doc: Mapping[str, Any], source: str) -> ScheduleSection:
    """Report section for an autoscaling schedule (``hetplan autoscale --out schedule.json``).

    Raises:
        InputError: as :func:`check_schedule`.
    """
    s = _parse(doc, source)
    return ScheduleSection(
        source=source,
        scenario=s.scenario,
        curve_source=s.curve.source,
        summary=s.summary,
        windows=tuple(s.windows),
        warnings=tuple(s.warnings),  # schedules written before hetplan carried warnings have none
        doc=doc,
    )
