"""One HiGHS solve in a forked process that is killed at a hard deadline: every MILP solve stops, whatever HiGHS
does inside.

HiGHS checks its time limit and its interrupt callbacks in the simplex, the interior point method and between
branch-and-bound nodes, but not everywhere: HiGHS 1.16 was seen to sit in one presolve rule
(``HPresolve::strengthenInequalities``, inside a sub-MIP of its root reduced-cost heuristic) for over 16 minutes
against a 30 s time limit, deaf to ``cancelSolve()``. A thread in this process cannot be stopped there, so the solve
runs in a child process forked from this one (the model is already built: nothing is copied but the solution):

- The child runs HiGHS (:meth:`~pulp.HiGHS.callSolver`), reads the answer as PuLP does (``findSolutionValues``) and
  writes it to a pipe; each improving MIP solution is written as it is found (HiGHS's improving-solution callback,
  with the dual bound at that moment), so a killed solve still has its incumbent and bound.
- The parent waits on the pipe in 50 ms slices (Ctrl-C, SIGTERM and ``--timeout`` run their handlers between
  them), and kills the child with SIGKILL when the hard deadline passes, when its caller stops
  (:func:`hetplan.solvers.milp_threads.solve_in_threads`) or when a signal handler raises.

A fork costs a few milliseconds (page tables of this process; measured in ``docs/speed.md``). Source: hetplan's own
reconstruction.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import select
import signal
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_HEADER = struct.Struct("<Q")
_PR_SET_PDEATHSIG = 1  # prctl(2) option (linux/prctl.h)
#: Seconds between the parent's checks of its deadline and its caller while it waits on the child.
POLL_S = 0.05


@dataclass(frozen=True)
class ProcessOutcome:
    """What a solve in a child process gave.

    ``status``, ``sol_status``: PuLP's codes for the problem and the solution (as ``findSolutionValues`` returns
    them), or, for a stopped solve, (1, LpSolutionIntegerFeasible) with an incumbent and (0, LpSolutionNoSolutionFound)
    without; ``values``: one value per variable of the problem, in ``LpProblem.variables()`` order (None: no
    solution); ``gap``: HiGHS's relative MIP gap (of the incumbent against the bound when stopped; nan unknown);
    ``bound``: the best dual bound known (nan unknown); ``stopped``: the child was killed at the hard deadline."""

    status: int
    sol_status: int
    values: tuple[float | None, ...] | None
    objective: float
    gap: float
    bound: float
    stopped: bool = False


def solve_in_child(
    solve: Callable[[], tuple[int, int, list[float | None], float, float, float]],
    subscribe: Callable[[Callable[[float, float, list[float]], None]], None],
    hard_stop_s: float,
    should_stop: Callable[[], bool],
) -> ProcessOutcome:
    """Run ``solve`` in a forked child and return its answer, or the last incumbent once ``hard_stop_s`` seconds
    have passed.

    Args:
        solve: called in the child: runs HiGHS on the already-built model and returns (status, sol_status, values,
            objective, gap, bound) (see :class:`ProcessOutcome`).
        subscribe: called in the child before ``solve`` with a function ``report(objective, bound, values)`` for
            each improving MIP solution.
        hard_stop_s: seconds after which the child is killed (SIGKILL) whatever it is doing.
        should_stop: polled every :data:`POLL_S`; True kills the child and raises :class:`InterruptedError`.

    Raises:
        InterruptedError: ``should_stop`` said so. Whatever a signal handler raises while the parent waits (the
        child is killed first). RuntimeError: the child failed (the message carries its error).
    """
    _reap_exited()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's stack
        gc.disable()  # a collection would touch every object of the parent's heap, copying its pages
        code = 0
        try:
            os.close(read_fd)
            _child_signals(parent)

            def report(objective: float, bound: float, values: list[float]) -> None:
                _send(write_fd, ("incumbent", objective, bound, values))

            subscribe(report)
            _send(write_fd, ("done", *solve()))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises it
            code = 1
            try:
                _send(write_fd, ("error", f"{type(exc).__name__}: {exc}"))
            except BaseException:  # noqa: BLE001 - nothing more the child can do
                pass
        finally:
            os._exit(code)
    os.close(write_fd)
    try:
        return _wait(pid, read_fd, time.monotonic() + max(0.0, hard_stop_s), should_stop)
    finally:
        os.close(read_fd)


def _child_signals(parent: int) -> None:
    """The child leaves Ctrl-C to the parent (which kills it), dies at once on SIGTERM, and dies with its parent
    (Linux's parent-death signal: a parent killed by SIGTERM or SIGKILL, e.g. a cancelled background plan, runs no
    clean-up, and a stalled HiGHS would otherwise run on as an orphan)."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):  # not this interpreter's main thread: the parent kills the child anyway
        pass
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's kill is the only stop
        pass
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)


def _send(fd: int, message: tuple[Any, ...]) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _wait(pid: int, fd: int, deadline: float, should_stop: Callable[[], bool]) -> ProcessOutcome:
    """Read the child's messages until its answer, the deadline or a stop; reap the child in every case."""
    buffer = bytearray()
    incumbent: tuple[float, float, list[float]] | None = None
    done: tuple[Any, ...] | None = None
    error: str | None = None
    reaped = False
    try:
        while done is None and error is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if should_stop():
                raise InterruptedError("the calling thread stopped these solves")
            ready, _, _ = select.select([fd], [], [], min(POLL_S, left))
            if not ready:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:  # the child exited without an answer (killed from outside, out of memory)
                error = error or "the solver process ended without an answer"
                break
            buffer += chunk
            while len(buffer) >= _HEADER.size:
                (size,) = _HEADER.unpack_from(buffer)
                if len(buffer) < _HEADER.size + size:
                    break
                message = pickle.loads(bytes(buffer[_HEADER.size : _HEADER.size + size]))
                del buffer[: _HEADER.size + size]
                if message[0] == "incumbent":
                    incumbent = message[1:]
                elif message[0] == "done":
                    done = message[1:]
                else:
                    error = str(message[1])
        if done is not None:
            status, sol_status, values, objective, gap, bound = done
            _reap_later(pid)  # it is exiting: tearing down its copy of this process's memory takes milliseconds
            reaped = True
            return ProcessOutcome(status, sol_status, tuple(values), objective, gap, bound)
        if error is not None and incumbent is None:
            raise RuntimeError(f"HiGHS failed in its solver process: {error}")
        return _stopped(incumbent)
    finally:
        if not reaped:
            _kill(pid)


def _stopped(incumbent: tuple[float, float, list[float]] | None) -> ProcessOutcome:
    """The outcome of a killed solve: its last incumbent and bound, as a time-limited answer."""
    from pulp import constants

    if incumbent is None:
        nan = float("nan")
        return ProcessOutcome(
            constants.LpStatusNotSolved, constants.LpSolutionNoSolutionFound, None, nan, nan, nan, True
        )
    objective, bound, values = incumbent
    gap = abs(objective - bound) / max(abs(objective), 1e-9) if math.isfinite(bound) else float("nan")
    return ProcessOutcome(
        constants.LpStatusOptimal, constants.LpSolutionIntegerFeasible, tuple(values), objective, gap, bound, True
    )


#: Children that sent their answer and are exiting; reaped (without waiting) at the next solve.
_EXITING: list[int] = []
_EXITING_LOCK = threading.Lock()


def _reap_later(pid: int) -> None:
    """Reap ``pid`` if it has exited, else keep it for :func:`_reap_exited` (a zombie for a moment)."""
    with _EXITING_LOCK:
        _EXITING.append(pid)
    _reap_exited()


def _reap_exited() -> None:
    """Reap the answered children that have exited since (never waits)."""
    with _EXITING_LOCK:
        for pid in list(_EXITING):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                _EXITING.remove(pid)


def _kill(pid: int) -> None:
    """SIGKILL the child and reap it (a child that already exited is only reaped)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


__all__ = ["POLL_S", "ProcessOutcome", "solve_in_child"]
