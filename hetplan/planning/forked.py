"""Independent planning tasks on this machine's cores: forked worker processes, results in task order.

``hetplan plan --weight-dtype auto`` plans each candidate weight dtype (the model's own, fp8) from scratch:
candidates, capacities and MILPs share nothing, and the work is mostly Python holding the GIL, so threads do
not overlap it (measured: 5.3 s serial against 5.1 to 5.8 s on two threads for the two dtypes of
``benchmarks/plan_speed.py``). :func:`run_forked` runs such tasks in processes forked from this one (they start
in milliseconds with everything loaded and inherit the tasks as closures: only the results are pickled).

- Workers: :func:`plan_workers`, the caller's :attr:`~hetplan.resources.Resources.plan_workers` (the CLI's
  ``HETPLAN_PLAN_WORKERS``) or else the cores this process may use (``os.sched_getaffinity``), capped at the task
  count; 1 runs them one after another in this process (as on a single core, or where ``fork`` does not exist).
  The results are the same either way (the tasks are deterministic; a test checks that plans are byte-identical).
- A task's exception comes back to the caller and is raised there (:class:`~hetplan.errors.HetplanError`
  keeps its what/why/fix); Ctrl-C, ``--timeout`` or any error while waiting terminates the workers.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from hetplan.executors import default_workers

T = TypeVar("T")

_TASKS: Sequence[Callable[[], Any]] = ()  # set before the fork: the workers inherit them


def plan_workers(tasks: int, allowed: int | None = None) -> int:
    """Processes for ``tasks`` independent planning tasks: ``allowed`` (a
    :attr:`~hetplan.resources.Resources.plan_workers`), else the usable cores; at most ``tasks``, at least 1; 1 where
    this platform cannot fork."""
    n = default_workers() if allowed is None else allowed
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(n, tasks))


def _worker_signals() -> None:
    """A worker leaves Ctrl-C to the caller (which terminates it) and dies quietly on SIGTERM (it inherits the
    CLI's handlers otherwise, and each would print a traceback)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _run_task(index: int) -> tuple[bool, Any]:
    try:
        return True, _TASKS[index]()
    except Exception as exc:  # noqa: BLE001 - handed back to the caller, which raises it
        return False, exc


def _start(tasks: Sequence[Callable[[], Any]], workers: int) -> tuple[ProcessPoolExecutor, list[Any]]:
    """Fork ``workers`` processes that inherit ``tasks`` and submit every task; the futures in task order."""
    global _TASKS
    _TASKS = tasks
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_signals)  # fmt: skip
    try:  # a fork pool starts its workers at the first submit: they hold the tasks from then on
        return pool, [pool.submit(_run_task, i) for i in range(len(tasks))]
    finally:
        _TASKS = ()


STOP_JOIN_S = 1.0
"""Seconds :func:`_stop` waits for the pool's manager thread after terminating the workers (it exits within
milliseconds once they are gone)."""


def _stop(pool: ProcessPoolExecutor) -> None:
    """Terminate the workers at once and drop what they had not finished.

    Waits (at most :data:`STOP_JOIN_S`) for the pool's manager thread to wind down: on Python 3.11 the interpreter's
    exit hook wakes every live manager thread through a pipe that the thread closes as it winds down, without a lock,
    so a Ctrl-C or SIGTERM that exits while it is still winding down could print an ``OSError: [Errno 9] Bad file
    descriptor`` traceback after "Interrupted" (seen once in a loaded test run)."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        proc.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    manager = getattr(pool, "_executor_manager_thread", None)
    if manager is not None and manager.is_alive():
        manager.join(timeout=STOP_JOIN_S)


def _value(outcome: tuple[bool, Any]) -> Any:
    ok, value = outcome
    if not ok:
        raise value
    return value


def run_forked(tasks: Sequence[Callable[[], T]], workers: int | None = None) -> list[T]:
    """``[task() for task in tasks]``, the tasks in up to ``workers`` (default :func:`plan_workers` of the usable
    cores) forked processes; results in task order.

    Raises:
        whatever a task raised (the first in task order), after every task has finished."""
    n = plan_workers(len(tasks)) if workers is None else max(1, min(workers, len(tasks)))
    if n <= 1:
        return [task() for task in tasks]
    pool, futures = _start(tasks, n)
    try:
        outcomes = [f.result() for f in futures]
    except BaseException:
        _stop(pool)
        raise
    pool.shutdown()
    return [_value(o) for o in outcomes]


class Background:
    """One task started now in a forked process (:func:`start_forked`), its result fetched later or dropped."""

    def __init__(self, task: Callable[[], Any]) -> None:
        pool, futures = _start([task], 1)
        self._pool: ProcessPoolExecutor | None = pool
        self._future = futures[0]

    def result(self) -> Any:
        """The task's result (waits for it); raises what the task raised.

        Raises:
            whatever the task raised."""
        assert self._pool is not None, "the task was cancelled"
        try:
            outcome = self._future.result()
        except BaseException:
            self.cancel()
            raise
        self._pool.shutdown()
        self._pool = None
        return _value(outcome)

    def cancel(self) -> None:
        """Stop the task at once (its process is terminated); safe to call twice."""
        if self._pool is not None:
            _stop(self._pool)
            self._pool = None


def start_forked(task: Callable[[], T], allowed: int | None = None) -> Background | None:
    """Start ``task`` in a forked process while the caller goes on (None where :func:`plan_workers` of ``allowed``
    gives one process only: the caller then runs it itself). The task should plan with one process inside
    (:meth:`hetplan.resources.Resources.serial`), so the two processes use two cores."""
    if plan_workers(2, allowed) < 2:
        return None
    return Background(task)


__all__ = ["Background", "plan_workers", "run_forked", "start_forked"]
