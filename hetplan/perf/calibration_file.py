"""The calibration file of ``hetplan calibrate-perf`` (:mod:`hetplan.perf.user_calibration`): its typed document
(:class:`CalibrationFile`, what ``--out`` writes and ``--json`` prints), read back and checked
(:func:`corrections_from_doc`, :func:`load_calibration`), and its corrections applied to closed-loop estimates
(:func:`corrected`).

Source: hetplan's own file format (``schema_version`` 1, ``kind: perf-calibration``).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from hetplan.errors import InputError
from hetplan.perf.settings import PerfCorrection, PerfSettings, find_correction

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

SCHEMA_VERSION = 1
KIND = "perf-calibration"
CONFIDENCE_QUANTILES = {"p50": 0.5, "p80": 0.8, "p90": 0.9}
#: Largest correction factor either way: a point 20x off the model is a wrong GPU or model name, not a level.
MAX_FACTOR = 20.0


class _Doc(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    def to_doc(self) -> dict[str, Any]:
        """The JSON/YAML-friendly dict (keys in field order)."""
        return self.model_dump(mode="python")


class ErrorSummary(_Doc):
    """Median and p90 of |relative error| and the signed median (bias), fractions rounded to 4 digits."""

    median_abs: float
    p90_abs: float
    bias: float


class MetricErrors(_Doc):
    """The errors of mean TTFT and of mean TPOT."""

    ttft: ErrorSummary
    tpot: ErrorSummary


class Residuals(_Doc):
    """A group's errors with the shipped curves (``before``) and corrected, leave-one-out."""

    before: MetricErrors
    leave_one_out: MetricErrors


class BandLevel(_Doc):
    """A band at one confidence: the step slowdowns of TTFT and TPOT (fractions)."""

    ttft: float
    tpot: float


class CorrectionEntry(_Doc):
    """One group's correction: engine x GPU x model x layout (``tp`` and ``weight_dtype`` ``"*"``: every layout),
    its factors, points, source files, residuals and (groups of enough points) band by confidence."""

    engine: str
    gpu: str
    model: str
    tp: int | str
    weight_dtype: str
    ttft_factor: float
    tpot_factor: float
    points: int
    sources: list[str]
    residuals: Residuals
    band: dict[str, BandLevel] | None = Field(default=None, exclude_if=lambda v: v is None)


class Overall(Residuals):
    """Every point's errors before and after, pooled over the layout groups."""

    points: int

    def to_doc(self) -> dict[str, Any]:
        """``points`` first, then ``before`` and ``leave_one_out``."""
        return {"points": self.points, **Residuals.model_validate(self.model_dump(exclude={"points"})).to_doc()}


class InputFile(_Doc):
    """An input file of the calibration and the SHA-256 of its bytes."""

    path: str
    sha256: str


class CalibrationFile(_Doc):
    """The calibration file (:func:`hetplan.perf.user_calibration.calibration_file`)."""

    schema_version: int
    kind: str
    generated_by: str
    method: str
    inputs: list[InputFile]
    overall: Overall
    corrections: list[CorrectionEntry]

    def to_doc(self) -> dict[str, Any]:
        """The document ``--out`` writes and ``--json`` prints."""
        return super().to_doc() | {"overall": self.overall.to_doc()}


def sha256_file(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --- the file, read back ---------------------------------------------------------------------------------------


def _finite(value: Any, where: str, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= float(value) <= hi:
        raise InputError(f"{where} must be a number in [{lo:g}, {hi:g}], got {value!r}",
                         fix="regenerate the file with hetplan calibrate-perf")  # fmt: skip
    return float(value)


class _Raw(BaseModel):
    """A typed view of a calibration file as read, values as written (each checked where it is used)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class _RawFile(_Raw):
    kind: Any = None
    schema_version: Any = None
    corrections: Any = None


class _RawCorrection(_Raw):
    engine: Any = None
    gpu: Any = None
    model: Any = None
    tp: Any = "*"
    weight_dtype: Any = "*"
    band: Any = None
    ttft_factor: Any = None
    tpot_factor: Any = None


class _RawBand(_Raw):
    ttft: Any = None
    tpot: Any = None


class EstimateRow(_Raw):
    """What calibration reads of a closed-loop estimate row (:func:`hetplan.perf.points.estimate_points`): the
    point's engine, GPU, model and layout, its TTFT and TPOT (s), clients and output tokens; ``error`` when the
    point could not be estimated."""

    error: Any = None
    engine: Any = None
    gpu: Any = None
    model: Any = None
    tp: Any = None
    weight_dtype: Any = None
    ttft_s: Any = None
    tpot_s: Any = None
    concurrency: Any = None
    osl: Any = None
    notes: Any = Field(default_factory=list)


def _regenerate() -> str:
    return "regenerate the file with hetplan calibrate-perf"


def corrections_from_doc(doc: Any, where: str) -> tuple[PerfCorrection, ...]:
    """The corrections of a calibration document (:meth:`CalibrationFile.to_doc`), checked.

    Raises:
        InputError: not a calibration file, a newer schema, or a field missing, of the wrong type or out of range
            (named, e.g. ``corrections[2].ttft_factor``).
    """
    from hetplan.perf.engines import ENGINE_NAMES

    f = _RawFile.model_validate(doc) if isinstance(doc, dict) else None
    if f is None or f.kind != KIND:
        raise InputError(f"{where} is not a perf calibration file (kind: {KIND})",
                         fix="pass the file hetplan calibrate-perf --out wrote")  # fmt: skip
    if f.schema_version != SCHEMA_VERSION:
        raise InputError(f"{where}: schema_version {f.schema_version!r} is not {SCHEMA_VERSION}",
                         fix="regenerate the file with this hetplan's calibrate-perf")  # fmt: skip
    if not isinstance(f.corrections, list):
        raise InputError(f"{where}: corrections is not a list", fix=_regenerate())
    out = []
    seen = set()
    for n, raw in enumerate(f.corrections):
        at = f"{where}: corrections[{n}]"
        if not isinstance(raw, dict):
            raise InputError(f"{at} is not a mapping", fix=_regenerate())
        c = _RawCorrection.model_validate(raw)
        for key, text in (("engine", c.engine), ("gpu", c.gpu), ("model", c.model)):
            if not isinstance(text, str) or not text:
                raise InputError(f"{at}.{key} must be text", fix=_regenerate())
        if c.engine not in ENGINE_NAMES:
            raise InputError(f"{at}.engine {c.engine!r} is not one of {', '.join(ENGINE_NAMES)}",
                             fix="fix or regenerate the file")  # fmt: skip
        tp_raw, dtype = c.tp, c.weight_dtype
        if tp_raw == "*":
            tp = 0
        elif isinstance(tp_raw, int) and not isinstance(tp_raw, bool) and 1 <= tp_raw <= 1024:
            tp = tp_raw
        else:
            raise InputError(f"{at}.tp must be a whole number 1..1024 or '*', got {tp_raw!r}", fix=_regenerate())
        if not isinstance(dtype, str) or not dtype or (tp == 0) != (dtype == "*"):
            raise InputError(f"{at}.weight_dtype must be a dtype with a TP, or '*' with tp '*', got {dtype!r}",
                             fix=_regenerate())  # fmt: skip
        entry_key = (str(c.engine), str(c.gpu), str(c.model), str(tp or "*"), dtype)
        if entry_key in seen:
            raise InputError(
                f"{at}: {'/'.join(entry_key)} is corrected twice",
                fix="keep one entry per engine x GPU x model x layout",
            )
        seen.add(entry_key)
        band = []
        raw_band = c.band or {}
        if not isinstance(raw_band, dict):
            raise InputError(f"{at}.band is not a mapping", fix=_regenerate())
        for conf, v in sorted(raw_band.items()):
            if conf not in CONFIDENCE_QUANTILES or not isinstance(v, dict):
                raise InputError(f"{at}.band.{conf} is not one of p50, p80, p90 with ttft and tpot",
                                 fix=_regenerate())  # fmt: skip
            level = _RawBand.model_validate(v)
            band.append((str(conf), _finite(level.ttft, f"{at}.band.{conf}.ttft", 0.0, 100.0),
                         _finite(level.tpot, f"{at}.band.{conf}.tpot", 0.0, 100.0)))  # fmt: skip
        out.append(
            PerfCorrection(
                str(c.engine),
                str(c.gpu),
                str(c.model),
                _finite(c.ttft_factor, f"{at}.ttft_factor", 1 / MAX_FACTOR, MAX_FACTOR),
                _finite(c.tpot_factor, f"{at}.tpot_factor", 1 / MAX_FACTOR, MAX_FACTOR),
                tuple(band),
                tp,
                dtype,
            )  # fmt: skip
        )
    return tuple(out)


def load_calibration(path: str | Path) -> tuple[tuple[PerfCorrection, ...], str]:
    """(corrections, SHA-256 of the file's bytes) of a calibration file.

    Raises:
        InputError: unreadable, not a calibration file, or a bad field (:func:`corrections_from_doc`).
    """
    from hetplan.catalog.loader import read_yaml_mapping
    from hetplan.errors import CatalogError

    p = Path(path)
    try:
        doc = read_yaml_mapping(p, "perf calibration file", "pass the file hetplan calibrate-perf --out wrote")
    except CatalogError as exc:
        raise InputError(exc.what, exc.why, exc.fix) from None
    return corrections_from_doc(doc, str(p)), sha256_file(p)


def with_calibration(settings: PerfSettings, path: str | Path | None) -> PerfSettings:
    """``settings`` with the calibration file ``path``'s corrections and hash (unchanged when ``path`` is None).

    Raises:
        InputError: as :func:`load_calibration`.
    """
    if path is None:
        return settings
    corrections, sha = load_calibration(path)
    return replace(settings, corrections=corrections, calibration_sha256=sha)


def corrected(
    rows: list[dict[str, Any]], corrections: tuple[PerfCorrection, ...], catalog: Catalog
) -> list[dict[str, Any]]:
    """Closed-loop estimates (:func:`hetplan.perf.points.estimate_points` output) with each row's correction
    applied to ``ttft_s``, ``tpot_s`` and ``itl_s`` (throughput follows Little's law with the corrected times) and
    a note naming it; rows without one (or with an error) unchanged. Names are looked up in ``catalog``."""

    out = []
    for r in rows:
        c = None
        e = EstimateRow.model_validate(r)
        if "error" not in r and corrections:
            c = find_correction(corrections, str(e.engine), catalog.find_gpu(str(e.gpu)).name,
                                catalog.find_model(str(e.model)).name, int(e.tp), str(e.weight_dtype))  # fmt: skip
        if c is None:
            out.append(r)
            continue
        ttft, tpot = e.ttft_s * c.ttft_factor, e.tpot_s * c.tpot_factor
        conc, osl = float(e.concurrency), float(e.osl)
        rps = conc / (ttft + (osl - 1.0) * tpot)
        layout = f"TP{c.tp} {c.weight_dtype}" if c.tp else "all layouts: TPOT only"
        note = f"calibrated: TTFT x {c.ttft_factor:.3f}, TPOT x {c.tpot_factor:.3f} ({c.gpu}, {c.model}, {layout})"
        out.append({**r, "ttft_s": ttft, "tpot_s": tpot, "itl_s": tpot, "requests_per_s": rps,
                    "output_tokens_per_s": rps * osl, "notes": [*e.notes, note]})  # fmt: skip
    return out


__all__ = [
    "CONFIDENCE_QUANTILES",
    "KIND",
    "MAX_FACTOR",
    "SCHEMA_VERSION",
    "BandLevel",
    "CalibrationFile",
    "CorrectionEntry",
    "EstimateRow",
    "ErrorSummary",
    "InputFile",
    "MetricErrors",
    "Overall",
    "Residuals",
    "corrected",
    "corrections_from_doc",
    "load_calibration",
    "sha256_file",
    "with_calibration",
]
