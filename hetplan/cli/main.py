"""Entry point of the ``hetplan`` command: registers every command on the app and runs it.

The command modules import :mod:`hetplan.cli.app` (and options, scenario flags, renderers), never this module or
each other; this is the one place that knows them all. Registration order is the order of ``hetplan --help``.
"""

from __future__ import annotations

import signal
import sys
from types import FrameType

from hetplan.cli import autoscale, catalog, emit, estimate, plan, profile, report, simulate, sweep
from hetplan.cli.app import STATE, CheckedCommand, app, catalog_app

app.command(cls=CheckedCommand)(plan.plan)
app.command(cls=CheckedCommand)(autoscale.autoscale)
app.command(cls=CheckedCommand)(emit.emit)
app.command(cls=CheckedCommand)(estimate.estimate)
app.command(cls=CheckedCommand)(report.report)
app.command(cls=CheckedCommand)(report.gate)
app.command("simulate", cls=CheckedCommand)(simulate.simulate_cmd)
app.command("calibrate", cls=CheckedCommand)(simulate.calibrate_cmd)
app.command(cls=CheckedCommand)(sweep.sweep)
catalog_app.command("gpus", cls=CheckedCommand)(catalog.gpus)
catalog_app.command("models", cls=CheckedCommand)(catalog.models)
catalog_app.command("prices", cls=CheckedCommand)(catalog.prices)
app.add_typer(profile.profile_app, name="profile")

__all__ = ["EXIT_SIGINT", "EXIT_SIGTERM", "Interrupted", "app", "main"]


class Interrupted(BaseException):
    """Raised in the main thread by SIGINT or SIGTERM. A BaseException, so that click does not turn it into
    "Aborted!" with exit 1, and every ``finally`` on the way out still runs (temporary files are removed: outputs
    are written atomically, so none is left half-written)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: Signals received while the command ran (a library that swallows every exception, as PuLP's import of highspy
#: does with a bare ``except:``, must not turn Ctrl-C into a different error).
_RECEIVED: list[int] = []


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _RECEIVED.append(signum)
    raise Interrupted(signum)


#: Exit codes for a command stopped by a signal: 128 + the signal's number, as shells report them.
EXIT_SIGINT = 128 + int(signal.SIGINT)
EXIT_SIGTERM = 128 + int(signal.SIGTERM)


def main() -> None:
    """Console-script entry point (``--debug`` is accepted anywhere on the command line).

    Ctrl-C (SIGINT) and SIGTERM stop the command with "Interrupted" on stderr and exit 130 or 143; nothing it was
    writing is left behind.
    """
    if "--debug" in sys.argv[1:]:
        STATE["debug"] = True
        sys.argv = [sys.argv[0], "--debug"] + [a for a in sys.argv[1:] if a != "--debug"]
    previous = {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        app()
    except BaseException:
        if not _RECEIVED:
            raise
        signum = _RECEIVED[0]
        name = "SIGTERM" if signum == signal.SIGTERM else "Ctrl-C"
        print(f"Interrupted ({name}): nothing half-written was left", file=sys.stderr)
        sys.exit(EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
