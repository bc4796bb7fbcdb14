"""Work budgets: every command estimates its work from its inputs before it starts and refuses, with the numbers,
work that could not finish in reasonable time (a "hang" to whoever waits for it).

The budgets, each checked before the work starts (and the simulator's also while it runs):

- :data:`MAX_SIM_EVENTS` simulator events per command, over all of its simulation runs (``simulate``,
  ``--find-capacity``, ``--concurrency``, ``calibrate``, ``plan``'s verification and re-sizing; each case of a
  sweep and each scenario of ``gate`` has its own). An event is an arrival, an engine iteration or a KV transfer;
  the simulator handles 150,000-250,000 a second on a shared 2-core machine, so the budget is 20-40 s. A run is
  refused before it starts when its arrivals alone exceed what is left, a closed loop when its least work would
  (:func:`closed_loop_events`), a plan's verification when the arrivals and KV transfers of its runs would; any
  run stops with the same error when it reaches the budget (requests that do not overlap cost one iteration per
  output token: 2,000 requests at 1e-5 req/s are a million events a run, and verification makes a dozen runs).
- :data:`MAX_SIM_INSTANCES` instances in one simulated deployment (a plan file edited to a million copies).
- :data:`MAX_FLEET_GPUS` GPUs in a planned fleet, estimated by :func:`fewest_gpus` (a goodput target of 1e7 req/s
  of Llama-3-8B needs about 2.2 million; its price-sensitivity MILPs ran for over an hour). Plans, gate, sweep
  cases and an autoscale schedule's peak.
- :data:`MAX_AUTOSCALE_LEVELS` demand levels of an autoscale schedule (two ILPs each; a ``level_step`` of 1e-12
  asked for trillions of grid steps and ended in ``MemoryError``).
- :data:`MAX_EMIT_UNITS` combos and instance types ``emit`` writes files for.
- :data:`MAX_UNTIMED_CASES` cases of a sweep without ``--timeout`` (:func:`check_cases`).

Elsewhere, with the same error: rows of an ``estimate --points`` file (:data:`hetplan.perf.points_table.MAX_POINTS`);
windows of a load curve (:data:`hetplan.autoscale.curves.MAX_WINDOWS`, an :class:`~hetplan.errors.InputError`).

A refusal is a :class:`WorkBudgetError` (exit 2): its ``Error:`` line names the input, the estimated work and the
budget, and its fix says which input to make smaller.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Protocol

from hetplan.errors import InputError

#: Simulator events one command may use over all its simulation runs (about 1.5-3 minutes of simulation on a shared
#: 2-core machine). Verification in and out of sample with re-sizing over several shapes used 6.5 million for
#: example (b) at 8 req/s with a large inventory (docs/simulation.md), over the 5 million this was first.
MAX_SIM_EVENTS = 20_000_000
#: Instances in one simulated deployment.
MAX_SIM_INSTANCES = 10_000
#: GPUs in one planned fleet (a plan or an autoscale schedule's peak).
MAX_FLEET_GPUS = 100_000
#: Cases of a sweep run without ``--timeout`` (a case plans in seconds, so 1,000 cases are about an hour on two
#: workers; a grid may expand to 100,000: a sweep that long must say when to stop, and ``--resume`` goes on).
MAX_UNTIMED_CASES = 1_000
#: Combos and instance types of a plan ``emit`` writes files for (a few files each per target).
MAX_EMIT_UNITS = 1_000
#: Demand levels of one autoscale schedule (two ILPs each: 72 levels of a small example take 19 s).
MAX_AUTOSCALE_LEVELS = 250


class WorkBudgetError(InputError):
    """The inputs ask for more work than the command's budget (exit code 2); the message has the numbers."""


def refuse(what: str, estimate: float, budget: float, unit: str, fix: str, left: bool = False) -> WorkBudgetError:
    """The error for work over budget: ``what`` names the input, ``estimate`` and ``budget`` are in ``unit``;
    ``left``: ``budget`` is what is left of the command's :data:`MAX_SIM_EVENTS`.

    Returns the error (the caller raises it, so type checkers see the raise).
    """
    over = (
        f"over the {budget:,.0f} left of hetplan's budget of {MAX_SIM_EVENTS:,} {unit} for one command"
        if left
        else f"over hetplan's budget of {budget:,.0f} {unit}"
    )
    return WorkBudgetError(
        f"{what} needs about {estimate:,.0f} {unit}, {over}",
        "hetplan estimates a command's work from its inputs and refuses work that would run for hours",
        fix,
    )


#: Simulator events left to the running command (None: no budget, as for the Python API outside a command).
_LEFT: list[int | None] = [None]
#: Whether the running command has a ``--timeout``.
_TIMED: list[bool] = [False]


@contextlib.contextmanager
def command_budget(events: int | None = None, timed: bool | None = None) -> Iterator[None]:
    """Give the command run inside this block ``events`` simulator events (default :data:`MAX_SIM_EVENTS`; nested
    blocks start their own count: each case of a sweep gets the whole budget); ``timed``: it runs under a
    ``--timeout`` (None: as the enclosing block)."""
    saved, saved_timed = _LEFT[0], _TIMED[0]
    _LEFT[0] = int(MAX_SIM_EVENTS if events is None else events)
    if timed is not None:
        _TIMED[0] = timed
    try:
        yield
    finally:
        _LEFT[0], _TIMED[0] = saved, saved_timed


def check_cases(n_cases: int) -> None:
    """A sweep of more than :data:`MAX_UNTIMED_CASES` cases needs a ``--timeout``.

    Raises:
        WorkBudgetError: more cases than that and no ``--timeout``.
    """
    if n_cases > MAX_UNTIMED_CASES and not _TIMED[0]:
        raise refuse(
            f"the grid's {n_cases:,} cases (each planned, some simulated) without --timeout", n_cases,
            MAX_UNTIMED_CASES, "cases",
            "pass --timeout (e.g. --timeout 8h: finished cases are kept and --resume goes on), or split the grid",
        )  # fmt: skip


def events_left() -> int | None:
    """Simulator events the running command has left (None: no budget)."""
    return _LEFT[0]


def charge_events(n: int) -> None:
    """Count ``n`` simulator events against the running command's budget."""
    if _LEFT[0] is not None:
        _LEFT[0] = max(0, _LEFT[0] - int(n))


SIM_FIX = (
    "simulate fewer requests (--max-requests, a shorter trace, workload.synthetic.requests) or a higher rate "
    "(requests that do not overlap cost one iteration per output token); for plan, --no-verify skips the simulation"
)


def events_exhausted(done: int, n_requests: int) -> WorkBudgetError:
    """The error when a simulation reaches the command's event budget after ``done`` events of its run."""
    return WorkBudgetError(
        f"the simulation of {n_requests:,} requests reached hetplan's budget of {MAX_SIM_EVENTS:,} simulator "
        f"events for one command ({done:,} in this run"
        + ("" if done >= MAX_SIM_EVENTS else ", the rest in earlier runs")
        + ")",
        "hetplan bounds a command's simulated work; each engine iteration, arrival and KV transfer is an event",
        SIM_FIX,
    )


def check_sim_start(n_arrivals: int, n_instances: int) -> None:
    """Before a simulation run: at most :data:`MAX_SIM_INSTANCES` instances, and arrivals within the events left.

    Raises:
        WorkBudgetError: either bound exceeded.
    """
    if n_instances > MAX_SIM_INSTANCES:
        raise refuse(
            "simulating the plan's deployment", n_instances, MAX_SIM_INSTANCES, "instances",
            "simulate a plan with fewer instances (combo counts) than that",
        )  # fmt: skip
    left = events_left()
    if left is not None and n_arrivals > left:
        raise refuse(f"the simulation of {n_arrivals:,} requests", n_arrivals, left, "simulator events", SIM_FIX, True)


def closed_loop_events(n: int, osl: int, concurrency: int, seqs: int, transfers: bool) -> int:
    """Simulator events a closed loop needs at least: ``n`` requests of ``osl`` output tokens each, at most
    ``min(concurrency, seqs)`` decoding together (``seqs``: the deployment's total ``max_num_seqs``), plus one
    arrival each and, with ``transfers`` (every request crosses a prefill-decode link), one KV transfer each."""
    return n * (2 if transfers else 1) + -(-n * osl // max(1, min(concurrency, seqs)))


class _Sized(Protocol):
    @property
    def goodput_req_per_s(self) -> float: ...

    def gpus_used(self) -> dict[str, int]: ...


def fewest_gpus(combos: Iterable[_Sized], demand_req_per_s: float) -> float:
    """The fewest GPUs a fleet of ``combos`` (anything with ``goodput_req_per_s`` and ``gpus_used()``, e.g.
    :class:`hetplan.solvers.cauchy.Combo`) could serve ``demand_req_per_s`` with: the combo with the most goodput
    per GPU, alone, in fractional copies. A lower bound of the plan's size (larger fleets pool their queues and
    need fewer GPUs per req/s than that, but not fewer than half as many in the cases measured)."""
    best = max((c.goodput_req_per_s / max(1, sum(c.gpus_used().values())) for c in combos), default=0.0)
    return demand_req_per_s / best if best > 0 else 0.0


def check_fleet(what: str, gpus: float, fix: str) -> None:
    """At most :data:`MAX_FLEET_GPUS` GPUs in a fleet; ``gpus`` is the least the inputs need.

    Raises:
        WorkBudgetError: over the bound.
    """
    if gpus > MAX_FLEET_GPUS:
        raise refuse(what, gpus, MAX_FLEET_GPUS, "GPUs", fix)


__all__ = [
    "MAX_AUTOSCALE_LEVELS",
    "MAX_EMIT_UNITS",
    "MAX_FLEET_GPUS",
    "MAX_SIM_EVENTS",
    "MAX_SIM_INSTANCES",
    "SIM_FIX",
    "WorkBudgetError",
    "charge_events",
    "MAX_UNTIMED_CASES",
    "check_cases",
    "check_fleet",
    "check_sim_start",
    "closed_loop_events",
    "command_budget",
    "events_exhausted",
    "events_left",
    "fewest_gpus",
    "refuse",
]
