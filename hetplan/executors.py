"""Where independent tasks run: a local process pool, or Ray tasks on a local instance or a cluster.

``hetplan sweep`` (one task per case) and ``hetplan simulate --windows`` (one task per time window) hand their
tasks to an :class:`Executor` and get each result back as soon as it is ready, in completion order; the callers
sort by their own ids, so results do not depend on the executor or on the order tasks finish.

- :class:`LocalExecutor` (``--executor local``): a ``concurrent.futures`` process pool of ``workers`` processes
  (forked from a forkserver that has hetplan's planner and simulator loaded, so a worker starts in milliseconds).
  ``workers=1`` runs the tasks in this process, one after another.
- :class:`RayExecutor` (``--executor ray``): one Ray task per task (``num_cpus=1``). ``address="local"`` starts a
  private Ray instance on this machine with ``workers`` CPUs and no dashboard (listening on the loopback interface
  only when the caller set that up first: :func:`hetplan.cli.app.worker_environment` does for the CLI);
  ``"auto"`` joins the cluster that ``ray start`` or ``RAY_ADDRESS`` names; anything else is a cluster address
  (``ray://head:10001``, ``head:6379``). A Ray instance that is already initialised in this process (a test's
  ``ray.init(num_cpus=2)``) is used as it is and left running. :meth:`Executor.share` puts an object into Ray's
  object store once, so every task that needs a trace or a catalog reads one copy.

Ctrl-C (``KeyboardInterrupt``) while :meth:`Executor.run` waits cancels the tasks that have not finished, stops the
workers and re-raises; results delivered before it are kept by the caller. Local workers ignore SIGINT and SIGTERM
themselves (a signal to the whole process group reaches them too), so only the driver decides.

Errors: a task that raises is reported through ``on_error`` with the exception (the pool or Ray goes on with the
other tasks); a worker process that dies (out of memory, killed) is reported the same way for the tasks it took.
:class:`~hetplan.errors.HetplanError` (exit 1) when Ray is not installed or the cluster cannot be reached.

Source: hetplan's own reconstruction (Ray: ``ray.remote``/``ray.wait``/``ray.cancel``, as Ray's documentation
describes them).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, ProcessPoolExecutor, wait
from typing import Any

from hetplan.errors import HetplanError, InputError

EXECUTORS = ("local", "ray")
#: Modules a local worker process has loaded before its first task (imported once, in the forkserver).
PRELOAD = ("hetplan.sweep.case", "hetplan.sim.windows")

OnDone = Callable[[int, Any], None]
OnError = Callable[[int, BaseException], None]


def default_workers() -> int:
    """The CPU cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count()``), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _ignore_sigint() -> None:
    """A local worker's initializer: Ctrl-C and SIGTERM sent to the whole process group (a terminal, ``kill -TERM
    -PGID``, a job runner) are for the driver, which cancels the work and kills its workers; a worker that died of
    them first broke the pool under the driver (a traceback from the pool's thread, failed rows)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


class Executor(ABC):
    """Runs ``fn(*args)`` for every argument tuple; see the module docstring. Subclasses: the local pool, Ray."""

    name = "executor"
    #: True when tasks run on machines that may not see this machine's files (Ray): callers ship file contents.
    ships_files = False

    @property
    @abstractmethod
    def workers(self) -> int:
        """How many tasks run at once (CPUs of the Ray cluster for Ray)."""

    def share(self, obj: Any) -> Any:
        """``obj`` in a form every task can take as an argument (Ray: an object reference; local: ``obj``)."""
        return obj

    @abstractmethod
    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], on_done: OnDone, on_error: OnError) -> None:
        """Run ``fn(*tasks[i])`` for every ``i``; call ``on_done(i, result)`` or ``on_error(i, exc)`` in this
        thread as each finishes. Ctrl-C cancels what is left and re-raises ``KeyboardInterrupt``."""

    def describe(self) -> str:
        """One line for the summary: ``local, 2 workers``."""
        return f"{self.name}, {self.workers} worker{'s' if self.workers != 1 else ''}"

    def close(self) -> None:
        """Release the pool or the Ray connection this executor started (nothing by default)."""
        return None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """A process pool of ``workers`` processes on this machine (``workers=1``: in this process)."""

    name = "local"

    def __init__(self, workers: int | None = None) -> None:
        n = default_workers() if workers is None else workers
        if n < 1:
            raise InputError(f"--workers must be >= 1, got {n}", fix="pass e.g. --workers 2 (default: the cores)")
        self._workers = n

    @property
    def workers(self) -> int:
        return self._workers

    def _pool(self) -> ProcessPoolExecutor:
        import multiprocessing

        # the workers inherit this process's environment when the forkserver starts: the CLI sets one BLAS and
        # OpenMP thread per worker there (hetplan.cli.app.worker_environment), as Ray gives its tasks
        if sys.platform.startswith("linux") or sys.platform == "darwin":
            from multiprocessing import forkserver

            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(list(PRELOAD))
            forkserver.ensure_running()
        else:
            ctx = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(max_workers=self._workers, mp_context=ctx, initializer=_ignore_sigint)

    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], on_done: OnDone, on_error: OnError) -> None:
        if self._workers == 1 or len(tasks) <= 1:
            for i, args in enumerate(tasks):
                try:
                    result = fn(*args)
                except Exception as exc:  # reported, the other tasks go on
                    on_error(i, exc)
                else:
                    on_done(i, result)
            return
        pool = self._pool()
        futures: dict[Future[Any], int] = {}
        try:
            futures = {pool.submit(fn, *args): i for i, args in enumerate(tasks)}
            pending = set(futures)
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in sorted(done, key=lambda f: futures[f]):
                    failure = fut.exception()
                    if failure is not None:
                        on_error(futures[fut], failure)
                    else:
                        on_done(futures[fut], fut.result())
        except BaseException:
            # Ctrl-C (or a callback that raised): drop what has not started and stop the workers now
            with _quiet_manager(pool):
                for fut in futures:
                    fut.cancel()
                processes = list(getattr(pool, "_processes", {}).values())
                pool.shutdown(wait=False, cancel_futures=True)
                for proc in processes:
                    if proc.is_alive():
                        proc.kill()  # workers ignore SIGTERM (see _ignore_sigint)
            raise
        pool.shutdown(wait=True)


#: Seconds a stopped pool's manager thread is waited for (it exits within milliseconds once the workers are gone).
STOP_JOIN_S = 1.0


@contextlib.contextmanager
def _quiet_manager(pool: Any) -> Iterator[None]:
    """Stop a process pool without the manager thread's race printing a traceback, and wait for that thread.

    On Python 3.11, when the workers die (a SIGTERM to the whole process group) while this thread cancels their
    futures, the pool's manager thread marks the cancelled futures broken and raises ``InvalidStateError`` in its
    thread (CPython's ``terminate_broken`` does not check the state): "Exception in thread ..." with a traceback,
    after the sweep had stopped cleanly (seen in a loaded test run). That one exception of that one thread is not
    printed; every other thread exception still is.
    """
    manager = getattr(pool, "_executor_manager_thread", None)
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if args.thread is manager and isinstance(args.exc_value, InvalidStateError):
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
        if manager is not None and manager.is_alive():
            manager.join(timeout=STOP_JOIN_S)
    finally:
        threading.excepthook = previous


def load_ray() -> Any:
    """The ``ray`` module.

    Raises:
        HetplanError: Ray is not installed (exit 1, with the install command).
    """
    try:
        return importlib.import_module("ray")
    except ImportError:
        raise HetplanError(
            "--executor ray needs Ray, which is not installed",
            "Ray is an optional dependency of hetplan",
            "pip install 'hetplan[ray]' (or use --executor local)",
        ) from None


class RayExecutor(Executor):
    """Ray tasks, one per task (see the module docstring for ``address``)."""

    name = "ray"
    ships_files = True

    def __init__(self, address: str = "local", workers: int | None = None) -> None:
        self.ray = load_ray()
        self.address = address
        self._started = False
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be >= 1, got {workers}", fix="pass e.g. --workers 2")
        if not self.ray.is_initialized():
            kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if address == "local":  # a private instance on this machine, as many CPUs as workers
                kwargs["num_cpus"] = workers or default_workers()
            else:
                kwargs["address"] = address
            try:
                self.ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise HetplanError(
                    f"cannot start or reach Ray at {address!r}",
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    "start a cluster (ray start --head) and pass --ray-address auto, or use --ray-address local",
                ) from None
            self._started = True
        self._remote: dict[Callable[..., Any], Any] = {}

    @property
    def workers(self) -> int:
        return int(self.ray.cluster_resources().get("CPU", 1))

    def describe(self) -> str:
        where = "local instance" if self.address == "local" else self.address
        return f"ray ({where}), {self.workers} CPUs"

    def share(self, obj: Any) -> Any:
        return self.ray.put(obj)

    def run(self, fn: Callable[..., Any], tasks: Sequence[tuple[Any, ...]], on_done: OnDone, on_error: OnError) -> None:
        ray = self.ray
        remote = self._remote.get(fn)
        if remote is None:
            remote = self._remote[fn] = ray.remote(num_cpus=1, max_retries=0)(fn)
        refs = {remote.remote(*args): i for i, args in enumerate(tasks)}
        pending = list(refs)
        try:
            while pending:
                # everything that is ready within half a second (one wait per batch, not per task)
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
                for ref in sorted(done, key=lambda r: refs[r]):
                    try:
                        result = ray.get(ref)
                    except Exception as exc:  # the task raised, or its worker died
                        on_error(refs[ref], getattr(exc, "cause", None) or exc)
                    else:
                        on_done(refs[ref], result)
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    def close(self) -> None:
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = False


def make_executor(name: str, workers: int | None = None, ray_address: str | None = None) -> Executor:
    """The executor ``--executor name`` asks for.

    Raises:
        InputError: unknown executor, ``--ray-address`` without ``--executor ray``, or ``--workers`` < 1.
        HetplanError: Ray is not installed or cannot be reached.
    """
    key = name.strip().lower()
    if key not in EXECUTORS:
        raise InputError(f"unknown --executor {name!r}", f"known: {', '.join(EXECUTORS)}", "pass local or ray")
    if key == "local":
        if ray_address is not None:
            raise InputError("--ray-address is for --executor ray", fix="add --executor ray, or drop --ray-address")
        return LocalExecutor(workers)
    return RayExecutor(ray_address or "local", workers)


__all__ = [
    "EXECUTORS",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "default_workers",
    "load_ray",
    "make_executor",
]
