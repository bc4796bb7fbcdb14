"""Printing to stdout when the reader may stop reading (``hetplan report PLAN | head -1``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from rich.console import Console


def to_stdout(write: Callable[[], None]) -> None:
    """Run ``write`` (printing to stdout) and flush; a reader that stopped reading (``hetplan report PLAN | head -1``)
    is not an error. Like ripgrep and other CLIs, the rest of the output is dropped silently: stdout is pointed at
    the null device, so neither this write nor Python's flush at exit raises again, and the command goes on (a gate
    still exits 1 on a failure, and its verdict still goes to stderr); with nothing failing the exit status is 0."""
    try:
        write()
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()


def silence_stdout() -> None:
    """Point stdout's file descriptor at the null device, so that neither a later write nor Python's flush at exit
    raises or prints again (a closed pipe, a full device); nothing to do where stdout has no real descriptor."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor behind stdout (a test runner)
        pass


class StdoutConsole(Console):
    """rich's console on stdout, with a closed pipe handled as :func:`to_stdout` does (rich's default exits 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError
