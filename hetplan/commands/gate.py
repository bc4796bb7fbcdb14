"""``hetplan gate`` (:func:`gate`, :func:`update_gate_baseline`, re-exported by :mod:`hetplan.api`): re-plan
scenarios with the current code and catalogs, and compare each with its stored baseline plan
(:func:`hetplan.report.gate.compare`) or refresh the baseline on purpose.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.errors import HetplanError, InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.plan.types import Plan
    from hetplan.report.gate import GateResult
    from hetplan.report.gate_types import GateRun
    from hetplan.resources import Resources
    from hetplan.scenario import Scenario
    from hetplan.solvers.milp import SolveSettings

GATE_KIND = "gate-baseline"
GATE_SCHEMA_VERSION = 1  # of the gate baseline file (its plans carry their own)
#: The strategy the gate re-plans with: ``hetplan plan``'s default (the cheapest of all), so the gated plan is the
#: one a user gets (the API's own default, ``cauchy``, gated the Cauchy plan even where Mélange was cheaper).
GATE_STRATEGY = "all"


@dataclass(frozen=True)
class GateBaseline:
    """A gate baseline file: one plan document per scenario name (each checked as a plan when read)."""

    scenarios: dict[str, dict[str, Any]]

    def to_doc(self) -> dict[str, Any]:
        """The file's document: schema version, kind and the scenarios sorted by name."""
        return {
            "schema_version": GATE_SCHEMA_VERSION,
            "kind": GATE_KIND,
            "scenarios": dict(sorted(self.scenarios.items())),
        }


@dataclass(frozen=True)
class Replanned:
    """Scenarios re-planned: ``plans`` by scenario name, and ``broken``: name -> why it cannot be planned now."""

    plans: dict[str, Plan]
    broken: dict[str, str]


def load_scenarios(paths: Sequence[Path]) -> list[tuple[Path, Scenario]]:
    """Each scenario file with its scenario, in order.

    Raises:
        InputError: a bad scenario file, or two scenarios with one name.
    """
    from hetplan.scenario import load_scenario

    loaded: list[tuple[Path, Scenario]] = []
    for path in paths:
        scenario = load_scenario(path)
        if any(scenario.name == s.name for _, s in loaded):
            raise InputError(f"two scenarios are named {scenario.name!r}", fix="give each scenario a unique name")
        loaded.append((Path(path), scenario))
    return loaded


def replan(
    scenarios: Sequence[tuple[Path, Scenario]],
    verify: bool,
    resources: Resources | None,
    solve: SolveSettings | None,
    strict: bool,
    progress: Callable[[str], None] | None,
    catalog: Catalog | None = None,
) -> Replanned:
    """Plan each scenario as ``hetplan plan`` does (``verify``: simulated and re-sized on a miss, each scenario
    with the whole work budget of a plan command, :mod:`hetplan.budget`), without the analysis, with ``catalog``
    (as in :func:`hetplan.api.plan`). A scenario that cannot be planned is ``broken`` (its reason names the file),
    or an error with ``strict``.

    Raises:
        InputError: with ``strict``, the first scenario that cannot be planned (naming it and its file).
    """
    from hetplan import api
    from hetplan.budget import command_budget

    plans: dict[str, Plan] = {}
    broken: dict[str, str] = {}
    for path, scenario in scenarios:
        if progress is not None:
            progress(scenario.name)
        try:
            if verify:
                with command_budget():
                    plans[scenario.name] = api.plan_verified(
                        scenario,
                        GATE_STRATEGY,
                        analysis=False,
                        resize=True,
                        resources=resources,
                        solve=solve,
                        catalog=catalog,
                    )
            else:
                plans[scenario.name] = api.plan(
                    scenario, GATE_STRATEGY, analysis=False, resources=resources, solve=solve, catalog=catalog
                )
        except HetplanError as exc:
            if strict:
                raise InputError(
                    f"scenario {scenario.name!r} ({path}) cannot be planned: {exc.what}", exc.why, exc.fix
                ) from None
            broken[scenario.name] = f"cannot be planned now ({path}): {exc.what}. {exc.why}".strip()
    return Replanned(plans, broken)


def compare_all(
    fresh: Replanned,
    baseline: Mapping[str, Mapping[str, Any]],
    max_cost_increase: float,
    min_tokens_per_usd_ratio: float | None,
    max_cost_increase_usd_per_hour: float,
) -> GateRun:
    """Compare each re-planned scenario with its baseline plan document (:func:`hetplan.report.gate.compare`); a
    scenario missing from the baseline or that could not be planned fails; a baseline scenario not re-planned is a
    warning."""
    from hetplan.report.gate import compare, failed
    from hetplan.report.gate_types import GateRun

    results: list[GateResult] = []
    for name, plan in fresh.plans.items():
        if name not in baseline:
            results.append(failed(name, "not in the baseline; add it on purpose with --update-baseline"))
        else:
            results.append(compare(plan, dict(baseline[name]), max_cost_increase, min_tokens_per_usd_ratio, name,
                                   max_cost_increase_usd_per_hour))  # fmt: skip
    results += [failed(name, reason) for name, reason in fresh.broken.items()]
    warnings = tuple(
        f"{name}: in the baseline but not re-planned (not among the scenarios given)"
        for name in baseline
        if name not in fresh.plans and name not in fresh.broken
    )
    return GateRun(bool(results) and all(r.passed for r in results), tuple(results), warnings)


def with_plans(stored: GateBaseline | None, plans: Mapping[str, Plan]) -> GateBaseline:
    """``stored``'s scenarios (None: none) with ``plans`` added or replaced."""
    from hetplan import api

    kept = dict(stored.scenarios) if stored else {}
    kept.update({name: api.to_doc(p) for name, p in plans.items()})
    return GateBaseline(kept)


def read_gate_baseline(path: str | Path) -> GateBaseline:
    """The gate baseline file at ``path``, checked (kind, schema version, each plan).

    Raises:
        InputError: missing, unreadable, not a gate baseline, or a plan that is not usable (naming its scenario).
    """
    from hetplan.catalog.files import read_yaml_file
    from hetplan.plan.doc import PlanMapping, check_plan, check_schema_version

    path = Path(path)
    if not path.exists():
        raise InputError(f"baseline {path} does not exist", fix="create it once with --update-baseline")
    doc = read_yaml_file(path, PlanMapping, "gate baseline", "a plan file written by 'hetplan plan --out'").model_dump()
    if doc.get("kind") != GATE_KIND or not isinstance(doc.get("scenarios"), dict):
        raise InputError(
            f"{path} is not a gate baseline",
            f"kind is {doc.get('kind')!r}",
            "write one with hetplan gate SCENARIOS --baseline FILE --update-baseline",
        )
    check_schema_version(doc, str(path), "gate baseline", (GATE_SCHEMA_VERSION,))
    scenarios = doc["scenarios"]
    for name, plan in scenarios.items():
        check_plan(plan, f"{path}: scenario {name}")
    return GateBaseline(scenarios)


def gate(
    scenarios: Sequence[str | Path],
    baseline: str | Path | GateBaseline,
    max_cost_increase: float = 0.02,
    min_tokens_per_usd_ratio: float | None = None,
    max_cost_increase_usd_per_hour: float = 0.0,
    verify: bool = True,
    resources: Resources | None = None,
    solve: SolveSettings | None = None,
    progress: Callable[[str], None] | None = None,
    catalog: Catalog | None = None,
) -> GateRun:
    """Re-plan the scenario files ``scenarios`` as ``hetplan plan`` does (``verify``: simulated and re-sized on a
    miss) and compare each with its plan in ``baseline`` (a gate baseline file, or what :func:`read_gate_baseline`
    read from one) (``hetplan gate``): a scenario fails when its cost rose more than the
    larger of ``max_cost_increase`` (a fraction) and ``max_cost_increase_usd_per_hour`` (the only allowance from a
    $0.00/h baseline), its tokens/USD fell below ``min_tokens_per_usd_ratio`` x the baseline's, it is not in the
    baseline, or it cannot be planned now; a baseline scenario not given is a warning (see
    :func:`hetplan.report.gate.compare`). ``progress(name)`` before each scenario; ``catalog`` as in
    :func:`hetplan.api.plan`. ``to_doc()`` of the result is the ``--json`` output.

    Raises:
        InputError: a bad scenario file, two scenarios with one name, or a bad baseline.
    """
    stored = baseline if isinstance(baseline, GateBaseline) else read_gate_baseline(baseline)
    fresh = replan(load_scenarios([Path(p) for p in scenarios]), verify, resources, solve, False, progress, catalog)
    return compare_all(fresh, stored.scenarios, max_cost_increase, min_tokens_per_usd_ratio,
                       max_cost_increase_usd_per_hour)  # fmt: skip


def update_gate_baseline(
    scenarios: Sequence[str | Path],
    baseline: str | Path,
    verify: bool = True,
    resources: Resources | None = None,
    solve: SolveSettings | None = None,
    progress: Callable[[str], None] | None = None,
    catalog: Catalog | None = None,
) -> GateBaseline:
    """Re-plan ``scenarios`` as :func:`gate` does and add or replace their plans in the gate baseline file
    ``baseline`` (created when absent; written atomically) (``hetplan gate --update-baseline``); returns the
    baseline written.

    Raises:
        InputError: a bad scenario file or baseline, or a scenario that cannot be planned (naming it).
    """
    from hetplan.io import dump_for_path, write_atomic

    path = Path(baseline)
    stored = read_gate_baseline(path) if path.exists() else None
    fresh = replan(load_scenarios([Path(p) for p in scenarios]), verify, resources, solve, True, progress, catalog)
    kept = with_plans(stored, fresh.plans)
    write_atomic(path, dump_for_path(path, kept.to_doc()), force=True)
    return kept


__all__ = [
    "GATE_KIND",
    "GATE_SCHEMA_VERSION",
    "GateBaseline",
    "GateRun",
    "Replanned",
    "compare_all",
    "gate",
    "load_scenarios",
    "read_gate_baseline",
    "replan",
    "update_gate_baseline",
    "with_plans",
]
