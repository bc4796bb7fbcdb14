"""The typer apps, the consoles and the error boundary every command shares.

Nothing here imports a command module (they import this one; :mod:`hetplan.cli.main` registers them), and
nothing here loads numpy, pandas, the solvers or the catalogs: ``hetplan --help`` only needs typer and rich.
"""

import logging
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from typer.core import TyperCommand, TyperGroup

from hetplan import __version__
from hetplan.errors import HetplanError


def check_flag_numbers(ctx: Any) -> None:
    """The numeric rule (:func:`hetplan.io.check_number`: finite, at most 1e15) on every int and float flag and
    argument of the command ``ctx`` runs, before the command starts: ``--rate-scale 1e308`` or a 30-digit
    ``--batch`` would reach arithmetic otherwise. Each flag's own bounds are checked by the command.

    Raises:
        typer.BadParameter: naming the flag (exit 2 with an ``Error`` line, as any bad flag).
    """
    from hetplan.errors import InputError
    from hetplan.io import check_number

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
