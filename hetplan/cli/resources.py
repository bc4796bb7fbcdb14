"""The CLI's reading of the environment variables that tune how MILPs run, into one
:class:`hetplan.solvers.milp.SolveSettings` that the commands pass down (library code reads no environment
variable):

- ``HETPLAN_SOLVE_THREADS``: independent solves run side by side (1 turns it off; default: the CPUs this process
  may use, at most 4, and 1 in a sweep's worker processes).
- ``HETPLAN_SLICE_PRESOLVE``: HiGHS presolve for slice (Mélange-shaped) models: ``light`` (default), ``off`` or
  ``on``.

Source: hetplan's own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.solvers.milp import SolveSettings

SOLVE_THREADS_ENV = "HETPLAN_SOLVE_THREADS"
SLICE_PRESOLVE_ENV = "HETPLAN_SLICE_PRESOLVE"
#: Values ``HETPLAN_SLICE_PRESOLVE`` takes (:data:`hetplan.solvers.milp.PRESOLVE_MODES`).
PRESOLVE_CHOICES = ("light", "off", "on")


def solve_settings(environ: Mapping[str, str] | None = None) -> SolveSettings:
    """The :class:`~hetplan.solvers.milp.SolveSettings` that ``environ`` (default: this process's environment)
    asks for; unset or empty variables keep the defaults.

    Raises:
        InputError: ``HETPLAN_SOLVE_THREADS`` is not a whole number >= 1, or ``HETPLAN_SLICE_PRESOLVE`` is not one of
        :data:`PRESOLVE_CHOICES` (each named with the fix).
    """
    from hetplan.solvers.milp import SolveSettings

    env = os.environ if environ is None else environ
    threads: int | None = None
    raw = env.get(SOLVE_THREADS_ENV, "").strip()
    if raw:
        try:
            threads = int(raw)
        except ValueError:
            threads = 0
        if not 1 <= threads <= 1024:
            raise InputError(
                f"{SOLVE_THREADS_ENV}={raw!r} is not a number of solver threads",
                "it takes a whole number from 1 to 1024 (1: solve one MILP at a time)",
                f"set {SOLVE_THREADS_ENV}=1 or {SOLVE_THREADS_ENV}=2, or unset it (default: the CPUs, at most 4)",
            )
    presolve = env.get(SLICE_PRESOLVE_ENV, "").strip().lower()
    if presolve and presolve not in PRESOLVE_CHOICES:
        raise InputError(
            f"{SLICE_PRESOLVE_ENV}={env.get(SLICE_PRESOLVE_ENV)!r} is not a HiGHS presolve mode",
            f"it takes {', '.join(PRESOLVE_CHOICES)} (the presolve of Mélange-shaped MILPs)",
            f"set {SLICE_PRESOLVE_ENV}=off or {SLICE_PRESOLVE_ENV}=light, or unset it (default: light)",
        )
    if presolve:
        return SolveSettings(threads=threads, slice_presolve=presolve)
    return SolveSettings(threads=threads)


__all__ = ["PRESOLVE_CHOICES", "SLICE_PRESOLVE_ENV", "SOLVE_THREADS_ENV", "solve_settings"]
