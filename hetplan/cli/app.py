"""The typer apps, the consoles and the error boundary every command shares.

Nothing here imports a command module (they import this one; :mod:`hetplan.cli.main` registers them), and
nothing here loads numpy, pandas, the solvers or the catalogs: ``hetplan --help`` only needs typer and rich.
"""

import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from hetplan import __version__
from hetplan.errors import HetplanError, InputError
from hetplan.resources import Resources

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog


def check_flag_numbers(ctx: Any) -> None:
    """The numeric rule (:func:`hetplan.input_checks.check_number`: finite, at most 1e15) on every int and float
    flag and argument of the command ``ctx`` runs, before the command starts: ``--rate-scale 1e308`` or a 30-digit
    ``--batch`` would reach arithmetic otherwise. Each flag's own bounds are checked by the command.

    Raises:
        typer.BadParameter: naming the flag (exit 2 with an ``Error`` line, as any bad flag).
    """
    from hetplan.errors import InputError
    from hetplan.input_checks import check_number

    for param in ctx.command.params:
        value = ctx.params.get(param.name or "")
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            if isinstance(item, int | float) and not isinstance(item, bool):
                try:
                    check_number(item, "the value")
                except InputError as exc:
                    raise typer.BadParameter(exc.what, ctx=ctx, param=param) from None


class CheckedCommand(TyperCommand):
    """A command whose numeric flags pass :func:`check_flag_numbers` before it runs."""

    def invoke(self, ctx: Any) -> Any:
        check_flag_numbers(ctx)
        return super().invoke(ctx)


class CheckedGroup(TyperGroup):
    """A command group (``hetplan profile``) whose own numeric flags pass :func:`check_flag_numbers`."""

    def invoke(self, ctx: Any) -> Any:
        check_flag_numbers(ctx)
        return super().invoke(ctx)


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Capacity planner for LLM serving on heterogeneous GPU fleets.",
)
catalog_app = typer.Typer(no_args_is_help=True, help="List the GPU, model and price catalogs.")
app.add_typer(catalog_app, name="catalog")

#: Progress, notes and errors go to stderr, so stdout holds only what a command prints (tables, JSON).
err_console = Console(stderr=True, highlight=False)
#: ``debug``: ``--debug`` was given (tracebacks for expected errors too).
STATE = {"debug": False}
T = TypeVar("T")


def run_guarded(fn: Callable[[], T]) -> T:
    """Run ``fn``; turn :class:`HetplanError` into its three-line message and exit code (1 or 2)."""
    try:
        return fn()
    except HetplanError as exc:
        if STATE["debug"]:
            traceback.print_exc()
        err_console.print(exc.render(), markup=False)
        raise typer.Exit(exc.exit_code) from None


def _version(value: bool) -> None:
    if value:
        print(f"hetplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for expected errors too.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    STATE["debug"] = debug
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, stream=sys.stderr)
    use_catalog_env()


CATALOG_ENV = "HETPLAN_CATALOG_DIR"
"""The environment variable naming a user catalog folder (read here only: the library takes the folder)."""


_CATALOG: "list[Catalog]" = []  # the last folder's catalog (a command run in-process after another reuses its files)


def use_catalog_env() -> None:
    """Check ``HETPLAN_CATALOG_DIR`` before any command runs (:func:`catalog_from_env`): a folder that does not
    exist or lacks a catalog file is an error naming the variable and the missing file (exit 2), not a silent
    fall-back to the shipped catalogs. Nothing is read when the variable is unset, so ``--help`` stays light."""
    if os.environ.get(CATALOG_ENV, "").strip():
        catalog_from_env()


def catalog_from_env() -> "Catalog":
    """The :class:`~hetplan.catalog.context.Catalog` of ``HETPLAN_CATALOG_DIR`` (unset or empty: the shipped
    catalogs): what every command builds here and passes down (``catalog=`` to :mod:`hetplan.api`). The same
    folder as the command before keeps its loaded files.

    Raises:
        typer.Exit(2): the folder is not a catalog folder (the message names the variable and the missing file).
    """
    from pathlib import Path

    from hetplan.catalog.context import Catalog

    value = os.environ.get(CATALOG_ENV, "").strip()
    if not value:
        return Catalog.shipped()
    if _CATALOG and _CATALOG[0].folder == Path(value):
        return _CATALOG[0]
    _CATALOG[:] = [run_guarded(lambda: Catalog.from_folder(Path(value), CATALOG_ENV))]
    return _CATALOG[0]


WORKERS_ENV = "HETPLAN_PLAN_WORKERS"
"""The environment variable capping the processes a plan uses (read here only: the library takes
:class:`~hetplan.resources.Resources`)."""


def resources_from_env() -> Resources:
    """The :class:`~hetplan.resources.Resources` a command passes to :mod:`hetplan.api`: ``HETPLAN_PLAN_WORKERS``
    processes for planning (unset or empty: the usable cores; 1: one task after another in this process).

    Raises:
        InputError: ``HETPLAN_PLAN_WORKERS`` is not a whole number >= 1 (named, with the fix).
    """
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return Resources()
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise InputError(
            f"{WORKERS_ENV}={text!r} is not a number of worker processes",
            "it takes a whole number >= 1 (1: plan the weight dtypes one after another in this process)",
            f"set {WORKERS_ENV}=1 or {WORKERS_ENV}=2, or unset it (default: the usable cores)",
        )
    return Resources(plan_workers=n)


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
"""Thread-pool sizes a worker process gets (1 each, unless the user set them): see :func:`worker_environment`."""


@contextlib.contextmanager
def worker_environment(executor: str, ray_address: str | None) -> Iterator[None]:
    """The environment worker processes inherit, set for the block (``hetplan sweep``, ``simulate --windows``): one
    thread each for numpy's BLAS and OpenMP unless the user chose (N workers on N cores, each with a thread pool of
    N, only contend; as Ray gives its tasks; read by the forkserver the local pool starts from, so set before it
    starts), and for a private Ray instance (``--executor ray``, address ``local``) :func:`loopback_only` and no
    usage reporting. Thread variables this set are removed again after the block; the library sets none itself.
    """
    added = [key for key in THREAD_VARS if key not in os.environ]
    for key in added:
        os.environ[key] = "1"
    if executor == "ray":
        if (ray_address or "local") == "local":
            loopback_only()
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never report usage from a planner run
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def loopback_only() -> None:
    """Make a Ray instance started from this process listen on the loopback interface only.

    Ray takes the node's address from the route to the outside and binds its servers there, unless
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is false, which is how Ray keeps a single-machine instance on
    127.0.0.1 on macOS and Windows; hetplan sets it for ``--ray-address local`` (and for the test suite's
    ``ray.init``). It is read when Ray is imported, so the value Ray already read is set too.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER"):
        setattr(constants, "ENABLE_RAY_CLUSTER", False)  # noqa: B010 (Ray's module is typed; this is its switch)
