"""The typer apps, the consoles and the error boundary every command shares.

Nothing here imports a command module (they import this one; :mod:`hetplan.cli.main` registers them), and
nothing here loads numpy, pandas, the solvers or the catalogs: ``hetplan --help`` only needs typer and rich.
"""

import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console

from hetplan import __version__
from hetplan.errors import HetplanError, InputError
from hetplan.resources import Resources

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


def use_catalog_env() -> None:
    """Point the catalog loader at ``HETPLAN_CATALOG_DIR`` (unset or empty: the shipped catalogs), every command.

    A folder that does not exist or lacks a catalog file is an error naming the variable and the missing file
    (exit 2), not a silent fall-back to the shipped catalogs. The loader is imported only when the variable is set
    or it is already loaded (an in-process caller ran a command before), so ``--help`` stays light.
    """
    value = os.environ.get(CATALOG_ENV, "").strip()
    if not value and "hetplan.catalog.loader" not in sys.modules:
        return
    from pathlib import Path

    from hetplan.catalog.loader import use_catalog_dir

    run_guarded(lambda: use_catalog_dir(Path(value) if value else None, CATALOG_ENV))


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
