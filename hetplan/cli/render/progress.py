"""Progress on stderr for the commands that take seconds to minutes (plan's verification and re-sizing,
find-capacity, autoscale): rich's progress bar with the current step and the time so far.

- On a terminal, when the command prints a table: a transient bar (gone when the command prints its answer).
- Otherwise (a pipe, a log file, ``--json``): plain one-line status messages, no control codes: one when the step
  changes and, while a step runs on, the same step again every :data:`HEARTBEAT_S` seconds, each with the time so
  far (``planning: re-size attempt 2 of 5 (headroom 0.62): enumerating combos [0:00:14]``), so a log shows within
  seconds what runs.

:class:`StepLog` keeps the last step, so ``--timeout`` can say what was running (:mod:`hetplan.cli.deadline`).

Source: hetplan's own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape

#: Seconds between two plain status lines of one long step (off a terminal).
HEARTBEAT_S = 10.0


class StepLog:
    """The last step a command reported (``label: step``), for messages about what was running."""

    def __init__(self) -> None:
        self.step = ""

    def describe(self) -> str:
        """The last step, or "" before the first."""
        return self.step


class Bar:
    """What a command calls as its work goes on: :meth:`text` for a new step, :meth:`count` for done/total."""

    def __init__(self, progress: Any, task: Any, log: StepLog | None = None) -> None:
        self._progress = progress
        self._task = task
        self._log = log
        self._plain = isinstance(progress, _Lines)

    def _shown(self, description: str) -> str:
        if self._log is not None:
            self._log.step = description
        return description if self._plain else escape(description)

    def text(self, description: str) -> None:
        """Show ``description`` as the current step (markup escaped)."""
        self._progress.update(self._task, description=self._shown(description))

    def count(self, done: int, total: int | None = None) -> None:
        """``done`` of ``total`` steps (an unknown total shows a pulsing bar)."""
        self._progress.update(self._task, completed=done, total=total)

    def step(self, description: str) -> None:
        """One more step done, named ``description``; the total grows when the work takes more steps than guessed."""
        task = self._progress.tasks[0]
        done = task.completed + 1
        total = None if task.total is None else max(task.total, done)
        self._progress.update(self._task, description=self._shown(description), completed=done, total=total)


class _Lines:
    """The plain-line stand-in for rich's ``Progress`` (off a terminal or with ``--json``): prints ``label: step
    [h:mm:ss]`` when the step changes, and again every ``heartbeat_s`` while it runs on."""

    def __init__(self, console: Console, label: str, heartbeat_s: float) -> None:
        self.console = console
        self.label = label
        self.heartbeat_s = heartbeat_s
        self.tasks = [_Task()]
        self._start = time.monotonic()
        self._last = self._start
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._beat = threading.Thread(target=self._heartbeat, name="hetplan-progress", daemon=True)

    def __enter__(self) -> _Lines:
        self._beat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._beat.join(timeout=1.0)

    def add_task(self, description: str, total: int | None = None) -> int:
        self.tasks[0].total = total
        return 0

    def update(self, task: int, description: str | None = None, completed: float | None = None,
               total: int | None = None) -> None:  # fmt: skip
        t = self.tasks[0]
        if completed is not None:
            t.completed, t.total = completed, total
        if description is not None and description != t.description:
            t.description = description
            self._print()

    def _print(self) -> None:
        with self._lock:
            t = self.tasks[0]
            if not t.description:
                return
            seconds = int(time.monotonic() - self._start)
            count = f" ({int(t.completed)}/{t.total})" if t.total else ""
            clock = f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            try:
                self.console.print(f"{self.label}: {t.description}{count} [{clock}]", markup=False, highlight=False,
                                   soft_wrap=True)  # fmt: skip
                self.console.file.flush()
            except (OSError, ValueError):  # stderr gone: progress is not worth failing the command for
                pass
            self._last = time.monotonic()

    def _heartbeat(self) -> None:
        while not self._done.wait(0.25):
            if time.monotonic() - self._last >= self.heartbeat_s:
                self._print()


class _Task:
    def __init__(self) -> None:
        self.description = ""
        self.completed: float = 0
        self.total: int | None = None


@contextmanager
def progress_bar(
    console: Console,
    label: str,
    total: int | None = None,
    enabled: bool = True,
    log: StepLog | None = None,
    heartbeat_s: float = HEARTBEAT_S,
) -> Iterator[Bar]:
    """Progress on ``console`` (stderr) while the block runs: on a terminal with ``enabled`` a transient bar
    (``label: step  ━━━━  3/12  0:00:07``), else plain status lines (module docstring). ``log`` receives each step.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not (enabled and console.is_terminal):
        lines = _Lines(console, label, heartbeat_s)
        with lines:
            yield Bar(lines, lines.add_task("", total=total), log)
        return

    columns: list[Any] = [TextColumn(f"{escape(label)}: {{task.description}}"), BarColumn()]
    if total is not None:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    bar = Progress(*columns, console=console, transient=True)
    with bar:
        task = bar.add_task("starting", total=total)
        yield Bar(bar, task, log)
