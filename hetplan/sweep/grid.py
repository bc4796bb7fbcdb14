"""Sweep grid files and their expansion into cases.

A grid names a base scenario (``base:``, or a ``scenarios`` axis) and axes (:mod:`hetplan.sweep.axes`), expanded
as a product (``axes:``, first axis varying slowest), as explicit cases (``cases:``, each a mapping axis ->
value), or both (every explicit case times the product). Paths are relative to the grid file. Example::

    schema_version: 1
    kind: sweep
    name: fleet-review
    base: ../llama3-70b-azure-conv.yaml
    axes:
      goodputs: [3, 5, 8]
      slos: {standard: {ttft: 2s, tpot: 100ms}, tight: {ttft: 1s, tpot: 80ms}}
      clouds: [aws, gcp]
    verify: auto          # simulate each plan on its trace (auto: when the workload is a trace file)
    analysis: false       # price sensitivity and cost vs goodput in every plan (slower)

Each case gets an id (``case-007``: its position in the expansion), the scenario it plans (validated here, so a
bad value stops the sweep before any work with exit 2 naming the axis), its plan options and
:attr:`Case.inputs_sha256`: SHA-256 over hetplan's version, the catalog's SHA-256, the scenario fields with every
file replaced by its content's SHA-256, and the options. ``--resume`` reuses a plan file only when that hash
matches.

Errors (all :class:`~hetplan.errors.InputError`, exit 2): an unknown key, axis or value, conflicting axes, an empty
product, a missing file, a case more than :data:`MAX_CASES`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from hetplan import __version__
from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import format_validation, read_yaml_mapping
from hetplan.errors import InputError
from hetplan.planning.dtypes import AUTOS
from hetplan.sweep.axes import (
    AXES,
    ENGINES,
    QUESTION_AXES,
    SERVED_AXES,
    CaseOptions,
    apply,
    axis_values,
    check_axis_name,
    check_conflicts,
)

if TYPE_CHECKING:
    from hetplan.scenario import Scenario

MAX_CASES = 100_000
#: What ``verify: auto`` does: verify a case when its workload is a trace file.
VERIFY_MODES = (True, False, "auto")


class GridFile(BaseModel):
    """The grid file's fields (see the module docstring); unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")
    schema_version: Literal[1] = 1
    kind: Literal["sweep"] = "sweep"
    name: str = "sweep"
    description: str | None = None
    base: str | None = None
    axes: dict[str, Any] = {}
    cases: list[dict[str, Any]] | None = None
    strategy: str = "cauchy"
    analysis: bool = False
    verify: bool | Literal["auto"] = "auto"
    policy: str = "fcfs"
    group_by: list[str] | None = None
    pareto_by: list[str] | None = None


@dataclass(frozen=True)
class Case:
    """One case of a sweep.

    Attributes:
        id: ``case-007`` (position in the expansion, zero-padded: sorting by id is sorting by position).
        axes: (axis, label) of every axis the case sets, in grid order.
        scenario: the scenario's fields (``Scenario.model_dump(by_alias=True)``), file paths absolute.
        base_dir: the base scenario's folder. base: the base scenario file as the grid names it.
        strategy / engine / policy / analysis / verify: the plan options.
        files: absolute paths of the files the case reads (trace, price file, config.json), in that order.
        inputs_sha256: see the module docstring.
        spec: the validated scenario (``scenario`` is its fields, as shipped to workers and hashed).
    """

    id: str
    axes: tuple[tuple[str, str], ...]
    scenario: dict[str, Any]
    base_dir: str
    base: str
    strategy: str
    engine: str
    policy: str
    analysis: bool
    verify: bool
    files: tuple[str, ...]
    inputs_sha256: str
    spec: Scenario


@dataclass(frozen=True)
class Grid:
    """An expanded grid: its name, file, axes (in order), the cases and the report's grouping axes."""

    name: str
    path: str
    axes: tuple[str, ...]
    cases: tuple[Case, ...]
    group_by: tuple[str, ...]
    pareto_by: tuple[str, ...]


def _sha_file(path: str, cache: dict[str, str]) -> str:
    if path not in cache:
        cache[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    return cache[path]


def _files(scenario: Scenario) -> dict[str, str]:
    """The scenario's file fields (workload.path, prices, model when it is a file) that exist or must exist."""
    out: dict[str, str] = {}
    if isinstance(scenario.workload.path, str):
        out["workload.path"] = scenario.workload.path
    if isinstance(scenario.prices, str):
        out["prices"] = scenario.prices
    model = scenario.model
    if model.endswith(".json") or Path(model).is_absolute():
        out["model"] = model
    return out


def _hashed(scenario: Scenario, files: dict[str, str], shas: dict[str, str]) -> dict[str, Any]:
    """The scenario's fields with every file in ``files`` (see :func:`_files`) replaced by ``sha256:`` and its
    content's SHA-256 (what the inputs hash covers)."""
    update: dict[str, Any] = {}
    for field, file in files.items():
        sha = "sha256:" + _sha_file(file, shas)
        if field == "workload.path":
            update["workload"] = scenario.workload.model_copy(update={"path": sha})
        else:
            update[field] = sha
    return scenario.model_copy(update=update).model_dump(by_alias=True, exclude_none=True)


def _check_options(options: CaseOptions, source: Callable[[str], str]) -> None:
    """Refuse an unknown strategy, engine or policy; ``source(option)`` names the axis or grid key it came from."""
    from hetplan.plan.types import STRATEGIES
    from hetplan.sim.policies import ALIASES, POLICIES

    if options.strategy not in STRATEGIES:
        why = "--strategy hetis plans a fixed pool file, not a scenario" if options.strategy == "hetis" else ""
        raise InputError(
            f"{source('strategy')}: unknown strategy {options.strategy!r}",
            why or f"a sweep plans {', '.join(STRATEGIES)}",
            f"use one of {', '.join(STRATEGIES)}",
        )
    if options.engine not in ENGINES:
        raise InputError(
            f"{source('engine')}: engine {options.engine!r} is not an engine hetplan plans for",
            "plans carry engine: vllm only (the performance model imitates vLLM)",
            "use engines: [vllm], or drop the axis",
        )
    if options.policy not in POLICIES and options.policy not in ALIASES:
        raise InputError(f"{source('policy')}: unknown policy {options.policy!r}", f"known: {', '.join(POLICIES)}",
                         f"use {', '.join(POLICIES)}")  # fmt: skip


def _base_doc(path: str, cache: dict[str, tuple[dict[str, Any], str]], where: str) -> tuple[dict[str, Any], str]:
    """The base scenario's fields with its own relative paths made absolute, and its folder."""
    from hetplan.scenario import load_scenario

    if path not in cache:
        try:
            loaded = load_scenario(path)
        except InputError as exc:
            raise InputError(f"{where}: {exc.what}", exc.why, exc.fix) from None
        absolute: dict[str, Any] = {}  # the scenario's own relative paths, made absolute
        if isinstance(loaded.workload.path, str):
            trace = str(Path(loaded.resolve(loaded.workload.path) or "").resolve())
            absolute["workload"] = loaded.workload.model_copy(update={"path": trace})
        if loaded.prices:
            absolute["prices"] = str(Path(loaded.resolve(loaded.prices) or "").resolve())
        local = Path(loaded.resolve(loaded.model) or "")
        if local.exists():
            absolute["model"] = str(local.resolve())
        doc = loaded.model_copy(update=absolute).model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
        doc.pop("autoscale", None)  # a sweep plans; the load curve is autoscale's
        cache[path] = (doc, loaded.base_dir)
    doc, folder = cache[path]
    return json.loads(json.dumps(doc)), folder


def load_grid(path: str | Path) -> GridFile:
    """Read and check a grid file's top-level fields.

    Raises:
        InputError / CatalogError: unreadable file, unknown key, wrong type (the message names the field).
    """
    data = read_yaml_mapping(Path(path), "sweep grid", "see docs/sweep.md")
    try:
        return GridFile.model_validate(data)
    except ValidationError as exc:
        raise InputError(
            f"sweep grid {path} is invalid", format_validation(exc), "fix the named fields (docs/sweep.md)"
        ) from None


def expand(path: str | Path, catalog: Catalog | None = None) -> Grid:
    """Read the grid at ``path`` and expand it into validated cases (see the module docstring), their clouds and
    regions checked against ``catalog``'s prices and its hash in every case's inputs hash (None: the shipped
    catalogs).

    Raises:
        InputError: see the module docstring; every message names the axis or field.
    """
    grid = load_grid(path)
    folder = Path(path).resolve().parent
    product = {name: axis_values(check_axis_name(name).name, raw) for name, raw in grid.axes.items()}
    explicit: list[dict[str, Any]] = [{}]
    if grid.cases is not None:
        if not grid.cases:
            raise InputError("empty product: 'cases' is an empty list", fix="list at least one case, or drop 'cases'")
        explicit = grid.cases
    if not product and grid.cases is None:
        raise InputError("the grid has no axes and no cases: nothing to sweep", fix="add 'axes:' or 'cases:'")
    used: list[str] = []  # the explicit cases' axes first (they vary slowest), then the product's
    for i, case in enumerate(explicit):
        for name in case:
            check_axis_name(name, f"cases[{i}]")
            if name in product:
                raise InputError(
                    f"axes {name!r} conflict: cases[{i}] sets {name!r}, which is also a product axis",
                    "a case would get two values for one field",
                    f"drop {name!r} from the case or from axes",
                )
            if name not in used:
                used.append(name)
    used += list(product)
    check_conflicts(used)
    for top, axis in (("strategy", "strategies"), ("policy", "policies")):
        if top in grid.model_fields_set and axis in used:
            raise InputError(f"axes {axis!r} conflict with the top-level {top!r}", fix="keep one of them")
    if grid.base is not None and "scenarios" in used:
        raise InputError("axes 'scenarios' conflicts with 'base'", "both name the base scenario", "keep one of them")
    for key, names in (("group_by", grid.group_by), ("pareto_by", grid.pareto_by)):
        for name in names or []:
            if name not in used:
                raise InputError(f"{key}: {name!r} is not an axis of this grid", fix=f"use axes of the grid: {used}")
    n = len(explicit) * math.prod(len(v) for v in product.values())
    if n > MAX_CASES:
        raise InputError(f"the grid expands to {n:,} cases", f"at most {MAX_CASES:,}", "split it into smaller grids")
    width = max(3, len(str(n - 1)))
    cat = catalog or Catalog.shipped()
    catalog_sha = cat.sha256
    bases: dict[str, tuple[dict[str, Any], str]] = {}
    shas: dict[str, str] = {}
    cases = []
    for index, (fixed, combo) in enumerate(itertools.product(explicit, itertools.product(*product.values()))):
        values: list[tuple[str, str, Any]] = []
        for name, (lab, value) in zip(product, combo, strict=True):
            values.append((name, lab, value))
        for name, value in fixed.items():
            values.append((name, axis_values(name, [value])[0][0], value))
        values.sort(key=lambda x: used.index(x[0]))
        cases.append(_case(index, width, values, grid, folder, bases, shas, catalog_sha, cat))
    group_by = tuple(grid.group_by) if grid.group_by is not None else tuple(a for a in used if a in QUESTION_AXES)
    pareto_by = tuple(grid.pareto_by) if grid.pareto_by is not None else tuple(a for a in used if a in SERVED_AXES)
    return Grid(grid.name, str(path), tuple(used), tuple(cases), group_by, pareto_by)


def _case(
    index: int,
    width: int,
    values: list[tuple[str, str, Any]],
    grid: GridFile,
    folder: Path,
    bases: dict[str, tuple[dict[str, Any], str]],
    shas: dict[str, str],
    catalog: str,
    prices: Catalog,
) -> Case:
    """Build and validate one case (see :func:`expand`; ``catalog``: its hash, ``prices``: the catalog itself)."""
    from hetplan.catalog.pricing import check_cloud, check_region
    from hetplan.perf.arch import check_dtypes
    from hetplan.scenario import Scenario
    from hetplan.units import parse_duration_s, parse_percentile

    case_id = f"case-{index:0{width}d}"
    labels = ", ".join(f"{n}={lab}" for n, lab, _ in values)
    where = f"{case_id} ({labels})"
    base_value = next((v for n, _, v in values if n == "scenarios"), grid.base)
    if base_value is None:
        raise InputError("no base scenario", fix="give 'base: SCENARIO.yaml' or a 'scenarios' axis")
    if not isinstance(base_value, str):
        raise InputError(f"axis 'scenarios': {base_value!r} is not a file path", fix="give scenario file paths")
    base_path = str((folder / base_value).resolve()) if not Path(base_value).is_absolute() else base_value
    doc, base_dir = _base_doc(base_path, bases, "axis 'scenarios'" if grid.base is None else "base")
    options = CaseOptions(strategy=grid.strategy.lower(), engine="vllm", policy=grid.policy.lower())
    for name, _, value in values:
        if name != "scenarios":
            apply(name, value, doc, options, folder)
    if "model" not in doc:
        raise InputError(f"{where}: no model", fix="set 'model:' in the base scenario or add a 'models' axis")
    axis_of = {f: n for n, _, _ in values for f in AXES[n].fields}

    def blame(field: str) -> str:
        hit = next((n for f, n in axis_of.items() if field == f or field.startswith(f + ".")), None)
        return f"axis {hit!r}" if hit else f"base scenario {Path(base_path).name}"

    try:
        scenario = Scenario.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"])
        raise InputError(
            f"{blame(field)}: invalid value in {where}", format_validation(exc), "fix the value in the grid"
        ) from None
    checks: list[tuple[str, Callable[[], object]]] = [
        ("cloud", lambda: check_cloud(prices, scenario.cloud)),
        # a price file's offers may name regions the catalog lacks: planning checks those
        ("region", lambda: None if scenario.prices else check_region(prices, scenario.region, scenario.cloud)),
        (
            "weight_dtype",
            lambda: check_dtypes("bf16" if scenario.weight_dtype in AUTOS else scenario.weight_dtype, "bf16"),
        ),
        ("kv_dtype", lambda: check_dtypes("bf16", scenario.kv_dtype)),
        ("slo.ttft", lambda: parse_duration_s(scenario.slo.ttft, "ttft")),
        ("slo.tpot", lambda: parse_duration_s(scenario.slo.tpot, "tpot")),
        ("slo.percentile", lambda: parse_percentile(scenario.slo.percentile, "slo.percentile")),
    ]
    for field, check in checks:
        try:
            check()
        except InputError as exc:
            raise InputError(f"{blame(field)}: {exc.what} in {where}", exc.why, "fix the value in the grid") from None

    def option_source(option: str) -> str:
        named = blame("@" + option)
        return f"{named if named.startswith('axis') else repr(option)} in {where}"

    _check_options(options, option_source)
    files = _files(scenario)
    for field, file in files.items():
        if not Path(file).is_file():
            raise InputError(f"{blame(field)}: {file} does not exist (case {where})", fix="fix the path in the grid")
    verify = bool(grid.verify) if grid.verify != "auto" else "workload.path" in files
    key = {"hetplan": __version__, "catalog_sha256": catalog, "scenario": _hashed(scenario, files, shas),
           "analysis": grid.analysis, "verify": verify, **asdict(options)}  # fmt: skip
    sha = hashlib.sha256(json.dumps(key, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return Case(
        case_id, tuple((n, lab) for n, lab, _ in values), scenario.model_dump(by_alias=True, exclude_none=True),
        base_dir, base_value, options.strategy, options.engine, options.policy, grid.analysis, verify,
        tuple(files.values()), sha, scenario,
    )  # fmt: skip


__all__ = ["MAX_CASES", "Case", "Grid", "GridFile", "expand", "load_grid"]
