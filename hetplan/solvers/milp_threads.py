"""Independent MILP solves side by side (:func:`solve_in_threads`), and the stop flag that ends the running HiGHS
solves when the calling thread unwinds (read by :mod:`hetplan.solvers.milp`'s interruptible HiGHS).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from hetplan.solvers.milp import SolveSettings

#: Set while :func:`solve_in_threads` unwinds after an exception in the calling thread (Ctrl-C, ``--timeout``):
#: HiGHS solves running in its worker threads stop within 50 ms.
_STOP = threading.Event()

T = TypeVar("T")


def solve_threads(settings: SolveSettings | None = None) -> int:
    """How many independent MILP solves :func:`solve_in_threads` runs at once: ``settings.threads`` when set (1
    turns it off), else 1 in a worker process of a pool, else the CPUs this process may use, at most 4. HiGHS
    itself always runs single-threaded, so every answer is the same whatever this is."""
    if settings is not None and settings.threads is not None:
        return settings.threads
    if multiprocessing.parent_process() is not None:
        return 1  # a sweep's or windowed simulation's worker process: the pool already uses the CPUs
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


def solve_in_threads(
    tasks: Sequence[Callable[[], T]], workers: int | None = None, settings: SolveSettings | None = None
) -> list[T]:
    """Run independent solves side by side (HiGHS releases the GIL while it solves, or runs in its own process)
    and return their results in the order of ``tasks``, so callers see the same answer as a sequential loop. An
    exception in a task is re-raised here after the others finish; an exception in the calling thread (Ctrl-C,
    ``--timeout``) stops the running HiGHS solves and is re-raised. ``workers``: threads (default
    :func:`solve_threads` of ``settings``).

    Source: hetplan's own reconstruction.
    """
    workers = solve_threads(settings) if workers is None else workers
    if workers <= 1 or len(tasks) <= 1:
        return [task() for task in tasks]
    pool = ThreadPoolExecutor(max_workers=min(workers, len(tasks)), thread_name_prefix="hetplan-milp")
    futures = [pool.submit(task) for task in tasks]
    try:
        return [f.result() for f in futures]
    except BaseException:
        _STOP.set()
        for f in futures:
            f.cancel()
        raise
    finally:
        pool.shutdown(wait=True)
        _STOP.clear()
