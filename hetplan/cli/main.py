"""Entry point of the ``hetplan`` command: registers every command on the app and runs it.

The command modules import :mod:`hetplan.cli.app` (and options, scenario flags, renderers), never this module or
each other; this is the one place that knows them all. Registration order is the order of ``hetplan --help``.
"""

from __future__ import annotations

import sys

from hetplan.cli import autoscale, catalog, emit, estimate, plan, profile, report, simulate, sweep
from hetplan.cli.app import STATE, app, catalog_app

app.command()(plan.plan)
app.command()(autoscale.autoscale)
app.command()(emit.emit)
app.command()(estimate.estimate)
app.command()(report.report)
app.command()(report.gate)
app.command("simulate")(simulate.simulate_cmd)
app.command("calibrate")(simulate.calibrate_cmd)
app.command()(sweep.sweep)
catalog_app.command("gpus")(catalog.gpus)
catalog_app.command("models")(catalog.models)
catalog_app.command("prices")(catalog.prices)
app.add_typer(profile.profile_app, name="profile")

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point (``--debug`` is accepted anywhere on the command line)."""
    if "--debug" in sys.argv[1:]:
        STATE["debug"] = True
        sys.argv = [sys.argv[0], "--debug"] + [a for a in sys.argv[1:] if a != "--debug"]
    app()
