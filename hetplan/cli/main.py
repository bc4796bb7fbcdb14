"""Entry point of the ``hetplan`` command: registers every command on the app and runs it.

The command modules import :mod:`hetplan.cli.app` (and options, scenario flags, renderers), never this module or
each other; this is the one place that knows them all. Registration order is the order of ``hetplan --help``.
"""

from __future__ import annotations

import errno
import signal
import sys
from types import FrameType

from hetplan.cli import (
    autoscale,
    calibrate_perf,
    catalog,
    emit,
    estimate,
    explore,
    plan,
    profile,
    report,
    simulate,
    sweep,
)
from hetplan.cli.app import STATE, CheckedCommand, app, catalog_app

app.command(cls=CheckedCommand)(plan.plan)
app.command(cls=CheckedCommand)(autoscale.autoscale)
app.command(cls=CheckedCommand)(emit.emit)
app.command(cls=CheckedCommand)(estimate.estimate)
app.command(cls=CheckedCommand)(report.report)
app.command(cls=CheckedCommand)(report.gate)
app.command("simulate", cls=CheckedCommand)(simulate.simulate_cmd)
app.command("calibrate", cls=CheckedCommand)(simulate.calibrate_cmd)
app.command("calibrate-perf", cls=CheckedCommand)(calibrate_perf.calibrate_perf)
app.command(cls=CheckedCommand)(sweep.sweep)
app.command(cls=CheckedCommand)(explore.explore)
catalog_app.command("gpus", cls=CheckedCommand)(catalog.gpus)
catalog_app.command("models", cls=CheckedCommand)(catalog.models)
catalog_app.command("prices", cls=CheckedCommand)(catalog.prices)
catalog_app.command("import-prices", cls=CheckedCommand)(catalog.import_prices)
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


def _is_stdout(obj: object) -> bool:
    """Whether ``obj`` writes to file descriptor 1 (a stream, or a rich console holding one in ``file``)."""
    for candidate in (obj, getattr(obj, "file", None)):
        fileno = getattr(candidate, "fileno", None)
        if callable(fileno):
            try:
                if fileno() == 1:
                    return True
            except (OSError, ValueError, TypeError, AttributeError):  # io.UnsupportedOperation is both
                continue
    return False


def _stdout_broken(exc: OSError) -> bool:
    """True when ``exc`` came from writing stdout (a full device, an I/O error): the innermost frames that raised it
    write to file descriptor 1, or flushing stdout fails too."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in frames[-4:]:  # the write itself: click's echo, rich's console, a stream's own write or flush
        if any(_is_stdout(v) for v in frame.f_locals.values()):
            return True
    try:
        sys.stdout.flush()
    except OSError:
        return True
    except (ValueError, AttributeError):  # closed, or no stdout at all
        return False
    # a builtin print() has no frame of its own: a full device is stdout's, as every file hetplan writes goes
    # through hetplan.io.write_atomic, which reports its own (OutputError)
    return exc.errno in _FULL


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _flush_stdout() -> None:
    """Flush stdout, turning a failure into :func:`_stdout_failed`'s one line and exit 1."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        _stdout_failed(exc)
    except (ValueError, AttributeError):
        pass


def _stdout_failed(exc: OSError) -> None:
    """Stdout could not be written (``hetplan ... > /dev/full``): one line on stderr, exit 1. Stdout is pointed at
    the null device first, so Python's own flush at exit neither raises nor prints again. Files the command wrote
    with ``--out`` are complete (written atomically); only what went to stdout is lost."""
    from hetplan.cli.render.stdout import silence_stdout

    what = exc.strerror or str(exc)
    silence_stdout()
    print(
        f"Error: cannot write the output to stdout: {what} (errno {exc.errno}); free space on its device or "
        "redirect it elsewhere",
        file=sys.stderr,
    )
    raise SystemExit(1)


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
        try:
            app()
        finally:
            if not _RECEIVED:
                _flush_stdout()  # here, not at interpreter exit, where a full device prints "Exception ignored"
    except OSError as exc:
        if _RECEIVED or not _stdout_broken(exc):
            raise
        _stdout_failed(exc)
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
