"""A scenario from a scenario file and command-line flags (plan, autoscale, profile fit), the settings for
emitting deployable files along with a plan (``--emit``, ``--validate``, ``--router-image``), and the check of
``plan``'s verification flags.

Pydantic, the catalogs and the emitters load inside the functions, when a command runs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.emit.settings import EmitSettings
    from hetplan.scenario import Scenario

#: The command-line flag of each scenario field, added to validation messages (``goodput_req_per_s (--goodput)``).
FLAG_FOR_FIELD = {
    "goodput_req_per_s": "--goodput",
    "headroom": "--headroom",
    "tp": "--tp",
    "max_ratio": "--max-ratio",
    "gpus": "--gpus",
    "inventory": "--inventory",
    "cloud": "--cloud",
    "region": "--region",
    "slo.ttft": "--ttft",
    "slo.tpot": "--tpot",
    "slo.percentile": "--percentile",
    "workload.synthetic.rate_per_s": "--rate/--goodput",
    "workload.rate_per_s": "--rate",
    "workload.synthetic.class": "--synthetic",
    "workload.prefix_cache": "--prefix-cache",
}


def split_list(text: str, flag: str, example: str) -> list[str]:
    """The items of a comma-separated flag value (``--gpus H100,L4``), blanks dropped.

    Raises:
        InputError: no item at all.
    """
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise InputError(f"{flag}: empty list", fix=f"pass e.g. {flag} {example}")
    return items


def _whole_number(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts '²' and '٣', which ``int()`` refuses."""
    return text.isascii() and text.isdigit()


def parse_inventory(text: str) -> dict[str, int]:
    """``--inventory H800=16,H20=32`` as ``{"H800": 16, "H20": 32}``.

    Raises:
        InputError: an item that is not GPU=COUNT, or a GPU named twice.
    """
    inv: dict[str, int] = {}
    for item in split_list(text, "--inventory", "H800=16,H20=32"):
        name, sep, count = item.partition("=")
        if not sep or not _whole_number(count.strip()) or not name.strip():
            raise InputError(
                f"--inventory: cannot read {item!r}",
                "expected GPU=COUNT with a whole number",
                "write e.g. --inventory H800=16,A800=32,H20=32",
            )
        if name.strip() in inv:
            raise InputError(f"--inventory names {name.strip()} twice", fix="give each GPU type once")
        inv[name.strip()] = int(count)
    return inv


def parse_tp_list(text: str) -> list[int]:
    """``--tp 1,2,4,8`` as ``[1, 2, 4, 8]``.

    Raises:
        InputError: an item that is not a whole number.
    """
    items = split_list(text, "--tp", "1,2,4,8")
    if not all(_whole_number(x) for x in items):
        raise InputError(f"--tp: cannot read {text!r}", "expected whole numbers", "pass e.g. --tp 1,2,4,8")
    return [int(x) for x in items]


@dataclass(frozen=True)
class _WorkloadFlags:
    """The flags of ``overrides`` that combine into the scenario's ``workload`` (each None when not given)."""

    workload_path: Any = None
    workload_format: Any = None
    prefix_cache: Any = None
    synthetic: Any = None
    rate: Any = None
    goodput_req_per_s: Any = None

    @classmethod
    def of(cls, overrides: dict[str, Any]) -> _WorkloadFlags:
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in overrides.items() if key in names})


def engine_overrides(engine: str | None) -> dict[str, Any]:
    """``--engine E`` or ``--engine E1,E2``: the scenario's ``engine`` (the first) and, for a list, ``engines``."""
    if engine is None:
        return {"engine": None}
    names = [e.strip().lower() for e in engine.split(",") if e.strip()]
    if len(names) <= 1:
        return {"engine": names[0] if names else engine.strip().lower()}
    return {"engine": names[0], "engines": list(dict.fromkeys(names))}


def build_scenario(scenario_file: Path | None, overrides: dict[str, Any]) -> Scenario:
    """Merge a scenario file (optional) with command-line overrides (scenario field or flag name -> value, None:
    not given) and validate the result.

    Paths given on the command line are made absolute (they are relative to the working directory, the
    scenario's own paths to its folder).

    Raises:
        InputError: flags that do not combine (named), no model or workload, or invalid values (naming the field
            and its flag).
    """
    from pydantic import ValidationError

    from hetplan.catalog.files import format_validation
    from hetplan.scenario import Scenario, load_scenario

    base: dict[str, Any] = {}
    base_dir = "."
    if scenario_file is not None:
        loaded = load_scenario(scenario_file)
        base = loaded.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
        base_dir = loaded.base_dir
    flags = _WorkloadFlags.of(overrides)
    if flags.workload_path is not None and flags.synthetic is not None:
        raise InputError("--workload and --synthetic both given", fix="pass one of them")
    for key, value in overrides.items():
        if value is None:
            continue
        if key in ("ttft", "tpot", "percentile"):
            if key != "percentile":  # a flag no request class would see is refused, not ignored
                from hetplan.workload.classes import check_slo_override

                check_slo_override(base.get("classes"), key, f"--{key}")
            base.setdefault("slo", {})[key] = value
        elif key in ("workload_path", "synthetic", "prefix_cache", "workload_format", "rate"):
            _workload_flag(base, flags, key, value)
        elif key == "perf_calibration":
            base.setdefault("perf", {})["calibration"] = str(Path(value).resolve())
        elif key in ("prices", "model") and (key == "prices" or Path(str(value)).exists()):
            base[key] = str(Path(value).resolve())
        else:
            base[key] = value
    if "model" not in base:
        raise InputError("no model given", fix="pass --model NAME or a scenario file with 'model:'")
    if "workload" not in base:
        raise InputError("no workload given", fix="pass --workload TRACE, --synthetic CLASS, or a scenario file")
    try:
        scenario = Scenario.model_validate(base)
    except ValidationError as exc:
        raise InputError("invalid plan settings", with_flags(format_validation(exc)), "fix the named values") from None
    return scenario.with_base_dir(base_dir)


def _workload_flag(base: dict[str, Any], flags: _WorkloadFlags, key: str, value: Any) -> None:
    """Apply the workload flag ``key`` (given as ``value``) to the scenario fields ``base``: ``--workload`` and
    ``--synthetic`` replace the scenario's workload (with ``--workload-format``, ``--rate`` and ``--prefix-cache``);
    those three alone change the scenario file's workload.

    Raises:
        InputError: a flag that needs a trace file or a workload it does not have, or ``--synthetic`` without a rate.
    """
    alone = flags.workload_path is None and flags.synthetic is None
    if key == "workload_path":
        workload: dict[str, Any] = {"path": str(Path(value).resolve())}
        if flags.workload_format is not None:
            workload["format"] = flags.workload_format
        if flags.rate is not None:
            workload["rate_per_s"] = flags.rate
        if flags.prefix_cache is not None:
            workload["prefix_cache"] = flags.prefix_cache
        base["workload"] = workload
    elif key == "prefix_cache":
        if alone:
            current = base.get("workload")
            if current is None:
                raise InputError("--prefix-cache needs a workload", fix="pass --workload TRACE or a scenario file")
            current["prefix_cache"] = value  # else set with --workload or --synthetic
    elif key == "synthetic":
        rate = flags.rate if flags.rate is not None else flags.goodput_req_per_s
        if rate is None:
            raise InputError(
                "--synthetic needs an arrival rate",
                "a synthetic workload has no timestamps",
                "pass --rate REQ_PER_S or --goodput REQ_PER_S",
            )
        if flags.workload_format is not None:
            raise InputError("--workload-format applies to trace files, not --synthetic", fix="drop it")
        workload = {"synthetic": {"class": value, "rate_per_s": rate}}
        if flags.prefix_cache is not None:
            workload["prefix_cache"] = flags.prefix_cache
        base["workload"] = workload
    elif alone:  # --workload-format or --rate with the scenario file's workload
        current = base.get("workload")
        if current is None or "synthetic" in current:
            flag = "--workload-format" if key == "workload_format" else "--rate"
            raise InputError(f"{flag} needs a trace file", fix="pass --workload TRACE (or --synthetic)")
        current["format" if key == "workload_format" else "rate_per_s"] = value


def with_flags(text: str) -> str:
    """Add the command-line flag after each scenario field a validation message names."""
    for field_name, flag in sorted(FLAG_FOR_FIELD.items(), key=lambda x: -len(x[0])):
        text = text.replace(f"{field_name}:", f"{field_name} ({flag}):")
    return text


def load_planner() -> None:
    """Import the planner (numpy, the solvers, the workload readers) now, so that the time a command reports as
    planning (``planned in 1.2 s``) is the planning, not the imports :mod:`hetplan.api` defers."""
    import hetplan.planning.pipeline  # noqa: F401


# --- --emit along with a plan or schedule ------------------------------------------------------------------------


def check_emit_flags(emit_dir: Path | None, validate: bool, router_image: str | None) -> None:
    """Refuse ``--validate`` and ``--router-image`` without ``--emit``.

    Raises:
        InputError: one of them is given without ``--emit``.
    """
    if validate and emit_dir is None:
        raise InputError("--validate checks emitted files", fix="add --emit DIR")
    if router_image is not None and emit_dir is None:
        raise InputError("--router-image is for emitted files", fix="add --emit DIR")


def emit_settings(router_image: str | None) -> EmitSettings:
    """Emit settings for --emit: the defaults of ``hetplan emit``, with --router-image when given."""
    from hetplan.emit.settings import EmitSettings

    return EmitSettings() if router_image is None else EmitSettings(router_image=router_image)


# --- the simulator check along with a plan ------------------------------------------------------------------------


def check_verify_flags(
    verify: bool, verify_policy: str, verify_strict: bool, confidence: str, size_for_confidence: bool
) -> str | None:
    """Refuse ``plan``'s verification flags that cannot apply, before any planning; returns the ``--confidence``
    level (``"p80"``; None for ``none``).

    Raises:
        InputError: a bad ``--confidence``, ``--size-for-confidence`` without one, an unknown ``--verify-policy``,
            or ``--verify-strict``, ``--size-for-confidence`` or a policy with ``--no-verify``.
    """
    from hetplan.perf.error_bands import parse_confidence

    level = parse_confidence(confidence)
    if size_for_confidence and level is None:
        raise InputError("--size-for-confidence needs a --confidence", fix="pass --confidence p80 (or p50, p90)")
    if verify:  # simulator check (hetplan.sim): refuse bad options before planning
        from hetplan.sim.policies import ALIASES, POLICIES

        if verify_policy.lower().strip() not in {*POLICIES, *ALIASES}:
            raise InputError(
                f"unknown --verify-policy {verify_policy!r}",
                f"known: {', '.join(POLICIES)}",
                f"pass --verify-policy {'|'.join(POLICIES)}",
            )
    elif verify_strict or verify_policy.lower().strip() != "fcfs" or size_for_confidence:
        flag = (
            "--verify-strict"
            if verify_strict
            else "--size-for-confidence"
            if size_for_confidence
            else ("--verify-policy")
        )
        raise InputError(f"{flag} needs the verification", "--no-verify skips it", f"drop --no-verify or {flag}")
    return level
