"""``--timeout SECONDS`` for every command that computes (plan, simulate and its --find-capacity, calibrate,
autoscale, sweep, estimate, report, gate, emit): the command stops at the deadline with an ``Error:`` line and
exit code 124 (the code GNU ``timeout`` uses), and leaves nothing half-written (outputs are written atomically,
and only when the command finishes; a sweep keeps the plan files of the cases it finished in ``OUT/plans/``, so
``--resume`` goes on from them). :func:`run_with_timeout` also gives the command its work budget
(:mod:`hetplan.budget`).

The deadline is a ``SIGALRM`` timer on the main thread. Its handler raises :class:`_Expired`, a
``BaseException`` (like Ctrl-C's), so that no ``except Exception`` on the way out swallows it; the timer then
repeats every 0.25 s in case a library's bare ``except:`` does, or the deadline fell inside an ``import`` (where
it waits: an interrupted import of a C extension can crash the process later). HiGHS solves stop within a
fraction of a second (:class:`hetplan.solvers.milp._InterruptibleHiGHS`). Only the standard library is imported
here (and :mod:`hetplan.budget`, which needs nothing more).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import re
import signal
from collections.abc import Callable
from types import FrameType
from typing import TypeVar

from hetplan.budget import command_budget
from hetplan.errors import HetplanError, InputError

T = TypeVar("T")
#: Exit code of a command stopped by ``--timeout`` (GNU ``timeout``'s).
EXIT_TIMEOUT = 124
#: Longest ``--timeout`` accepted: a week (a longer one is surely a typo, e.g. milliseconds given as seconds).
MAX_TIMEOUT_S = 7 * 24 * 3600.0
_TIMEOUT_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|min|m|h)?\s*$", re.ASCII)
_SCALE = {None: 1.0, "s": 1.0, "ms": 1e-3, "min": 60.0, "m": 60.0, "h": 3600.0}


class CommandTimeout(HetplanError):
    """The command ran past ``--timeout`` and was stopped (exit code 124)."""

    exit_code = EXIT_TIMEOUT


class _Expired(BaseException):
    """Raised in the main thread when the deadline passes."""


def _importing(frame: FrameType | None) -> bool:
    """True when ``frame`` runs inside an ``import``: an exception raised there can leave a C extension (pandas'
    parsers were seen to) half-initialised in ``sys.modules`` and crash the next use of it."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def parse_timeout_s(text: str) -> float:
    """``--timeout``: seconds (a bare number) or a duration with a unit (``90s``, ``500ms``, ``10m``, ``2h``).

    Raises:
        InputError: not a positive duration of at most :data:`MAX_TIMEOUT_S`.
    """
    match = _TIMEOUT_RE.match(text)
    seconds = float(match.group(1)) * _SCALE[match.group(2)] if match else float("nan")
    if not 0.01 <= seconds <= MAX_TIMEOUT_S:
        raise InputError(
            f"--timeout {text!r} is not a time limit hetplan accepts",
            f"it takes seconds (or a unit: 90s, 10m, 2h), from 0.01 s to {MAX_TIMEOUT_S:,.0f} s (a week)",
            "write it like --timeout 600 or --timeout 10m",
        )
    return seconds


def timeout_advice(step: str) -> str:
    """What to do about a command stopped by ``--timeout`` while ``step`` ran (its last progress message): the
    flag that skips that stage, where one does; raising the limit only where more time is what it needs."""
    text = step.lower()
    if "re-size" in text or "re-sized" in text:
        return (
            "the plan missed its SLOs in simulation and is being re-sized (each attempt plans and simulates again): "
            "pass --no-resize to keep the unverified plan (it says NOT verified), lower --goodput or relax the "
            "SLOs, or raise --timeout"
        )
    if "simulating" in text:
        return "pass --no-verify to skip the simulated check, or raise --timeout"
    if "analysis" in text or "price sensitivity" in text:
        return "pass --no-analysis to skip the price sensitivity and cost-versus-goodput solves, or raise --timeout"
    return "raise --timeout, or make the problem smaller (fewer GPUs, TP degrees or requests)"


def run_with_timeout(
    timeout: str | None, fn: Callable[[], T], command: str, doing: Callable[[], str] | None = None
) -> T:
    """Run ``fn`` and stop it when ``timeout`` (see :func:`parse_timeout_s`; None: no limit) passes. ``doing``
    gives the step that runs (its last progress message), named in the error with advice that fits it
    (:func:`timeout_advice`); ``fn`` runs with the command's work budget (:func:`hetplan.budget.command_budget`:
    every command runs through here).

    Raises:
        CommandTimeout: the deadline passed (the message names ``command`` and the limit).
        InputError: ``timeout`` is not a valid limit, or this platform has no ``SIGALRM``.
    """
    if timeout is None:
        with command_budget(timed=False):
            return fn()
    seconds = parse_timeout_s(timeout)
    if not hasattr(signal, "setitimer"):
        raise InputError("--timeout needs a POSIX system (SIGALRM)", fix="drop --timeout")

    def expire(signum: int, frame: FrameType | None) -> None:
        if not _importing(frame):  # the timer repeats: it fires again once the import is done
            raise _Expired

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.25)
    try:
        with command_budget(timed=True):
            return fn()
    except _Expired:
        signal.setitimer(signal.ITIMER_REAL, 0)
        step = doing() if doing is not None else ""
        raise CommandTimeout(
            f"{command} stopped after --timeout {timeout} ({seconds:g} s)" + (f" while {step}" if step else ""),
            "nothing half-written was left; outputs are written only when the command finishes",
            timeout_advice(step),
        ) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


__all__ = ["EXIT_TIMEOUT", "MAX_TIMEOUT_S", "CommandTimeout", "parse_timeout_s", "run_with_timeout", "timeout_advice"]
