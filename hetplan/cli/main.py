"""Entry point of the ``hetplan`` command."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from hetplan import __version__
from hetplan.errors import HetplanError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Capacity planner for LLM serving on heterogeneous GPU fleets.",
)
catalog_app = typer.Typer(no_args_is_help=True, help="List the GPU, model and price catalogs.")
app.add_typer(catalog_app, name="catalog")

err_console = Console(stderr=True, highlight=False)
STATE = {"debug": False}
F = TypeVar("F", bound=Callable[..., Any])


def run_guarded(fn: Callable[[], Any]) -> Any:
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
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for expected errors too."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    STATE["debug"] = debug
    logging.basicConfig(level=logging.DEBUG if debug else logging.WARNING, stream=sys.stderr)


from hetplan.cli import autoscale as _autoscale  # noqa: E402,F401  (registers commands)
from hetplan.cli import catalog as _catalog  # noqa: E402,F401
from hetplan.cli import emit as _emit  # noqa: E402,F401
from hetplan.cli import estimate as _estimate  # noqa: E402,F401
from hetplan.cli import plan as _plan  # noqa: E402,F401
from hetplan.cli import profile as _profile  # noqa: E402,F401
from hetplan.cli import report as _report  # noqa: E402,F401
from hetplan.cli import simulate as _simulate  # noqa: E402,F401


def main() -> None:
    """Console-script entry point (``--debug`` is accepted anywhere on the command line)."""
    if "--debug" in sys.argv[1:]:
        STATE["debug"] = True
        sys.argv = [sys.argv[0], "--debug"] + [a for a in sys.argv[1:] if a != "--debug"]
    app()
