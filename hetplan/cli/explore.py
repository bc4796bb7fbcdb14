"""``hetplan explore``: what-ifs of one scenario (goodput, TTFT, TPOT, a GPU's price, owned GPUs), the cost curve
with the plan at each point (:mod:`hetplan.explore`)."""

import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from hetplan import api
from hetplan.cli.app import catalog_from_env, err_console, run_guarded
from hetplan.cli.deadline import run_with_timeout
from hetplan.cli.options import TimeoutOpt, json_option
from hetplan.cli.render.explore import render_explore
from hetplan.cli.render.progress import StepLog, progress_bar
from hetplan.cli.resources import solve_settings
from hetplan.cli.scenario_flags import load_planner
from hetplan.errors import InputError
from hetplan.io import to_json


def explore(
    scenario_file: Annotated[Path, typer.Argument(help="Scenario YAML.", show_default=False)],
    vary: Annotated[
        list[str] | None,
        typer.Option(
            "--vary",
            help="An axis and its values (once or twice): goodput=1x,1.5x,2x (or +50%, or req/s), ttft=1s,2s,5s, "
            "tpot=50ms,100ms, price:GPU=-20%,+20% (or 0.8x), owned:GPU=+4,+8 (or counts).",
            show_default=False,
        ),
    ] = None,
    strategy: Annotated[
        str,
        typer.Option("--strategy", help="As hetplan plan: all (the cheapest), cauchy, homogeneous, melange or mixed."),
    ] = "all",
    verify: Annotated[
        bool,
        typer.Option(
            "--verify/--no-verify",
            help="Simulate each planned point at its goodput target, without re-sizing (default: on); --no-verify "
            "prints the analytic curve only.",
        ),
    ] = True,
    verify_policy: Annotated[str, typer.Option("--verify-policy", help="Scheduling policy for the check.")] = "fcfs",
    json_out: Annotated[bool, json_option("Print the points as JSON on stdout.")] = False,
    timeout: TimeoutOpt = None,
) -> None:
    """Vary goodput, an SLO, a GPU's price or the owned GPUs over a few values and print the cost at each point
    with its deployment and whether it holds in simulation.

    Example: hetplan explore examples/llama3-70b-azure-conv.yaml --vary goodput=1x,1.5x,2x
    """
    steps = StepLog()

    def work() -> tuple[dict[str, Any], float]:
        from hetplan.explore import parse_axes
        from hetplan.plan.types import STRATEGIES
        from hetplan.scenario import load_scenario

        parse_axes(list(vary or []))  # bad axes are refused before the scenario is read
        name = strategy.lower().strip()
        if name not in ("all", *STRATEGIES):
            raise InputError(f"unknown --strategy {strategy!r}", f"known: all, {', '.join(STRATEGIES)}",
                             "pass one of them")  # fmt: skip
        policy = verify_policy.lower().strip()
        if verify:
            from hetplan.sim.policies import ALIASES, POLICIES

            if policy not in {*POLICIES, *ALIASES}:
                raise InputError(f"unknown --verify-policy {verify_policy!r}", f"known: {', '.join(POLICIES)}",
                                 f"pass --verify-policy {'|'.join(POLICIES)}")  # fmt: skip
        elif policy != "fcfs":
            raise InputError("--verify-policy needs the check", "--no-verify skips it", "drop one of them")
        scenario = load_scenario(scenario_file)
        load_planner()
        start = time.perf_counter()
        with progress_bar(err_console, "explore", enabled=not json_out, log=steps) as bar:

            def step(done: int, total: int, point: str) -> None:
                bar.count(done, total)
                bar.text(f"point {min(done + 1, total)} of {total}: {point}" if done < total else "done")

            doc = api.explore(scenario, list(vary or []), name, verify, policy, progress=step, solve=solve_settings(),
                              catalog=catalog_from_env())  # fmt: skip
        return doc, time.perf_counter() - start

    doc, elapsed = run_guarded(lambda: run_with_timeout(timeout, work, "explore", steps.describe))
    from hetplan.explore import ExploreDoc

    typed = ExploreDoc.model_validate(doc)
    if json_out:
        typer.echo(to_json(doc), nl=False)
    else:
        render_explore(typed, Console())
    err_console.print(f"explored {len(typed.points)} points in {elapsed:.1f} s", highlight=False)
    failed = typed.counts.error
    if failed:  # a point that failed for another reason than infeasibility: its row says why
        err_console.print(f"Error: {failed} of {len(typed.points)} points failed (their rows say why)",
                          highlight=False, markup=False)  # fmt: skip
        raise typer.Exit(1)
