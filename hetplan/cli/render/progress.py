"""Progress bars on stderr for the commands that take seconds to minutes (plan's verification and re-sizing,
find-capacity, autoscale, sweeps): rich's progress bar with the current step and the time so far.

A bar is drawn only when stderr is a terminal and the command prints a table (with ``--json`` or a pipe it is
off, so scripts and logs get no control codes); it is transient (gone when the command prints its answer).

Source: hetplan's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape


class Bar:
    """What a command calls as its work goes on: :meth:`text` for a new step, :meth:`count` for done/total."""

    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def text(self, description: str) -> None:
        """Show ``description`` as the current step (markup escaped)."""
        self._progress.update(self._task, description=escape(description))

    def count(self, done: int, total: int | None = None) -> None:
        """``done`` of ``total`` steps (an unknown total shows a pulsing bar)."""
        self._progress.update(self._task, completed=done, total=total)

    def step(self, description: str) -> None:
        """One more step done, named ``description``; the total grows when the work takes more steps than guessed."""
        task = self._progress.tasks[0]
        done = task.completed + 1
        total = None if task.total is None else max(task.total, done)
        self._progress.update(self._task, description=escape(description), completed=done, total=total)


@contextmanager
def progress_bar(console: Console, label: str, total: int | None = None, enabled: bool = True) -> Iterator[Bar]:
    """A transient progress bar on ``console`` (stderr) while the block runs: ``label: step  ━━━━  3/12  0:00:07``.

    ``enabled`` False (``--json``) or a console that is not a terminal: nothing is drawn, and the yielded
    :class:`Bar` still accepts every call.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns: list[Any] = [TextColumn(f"{escape(label)}: {{task.description}}"), BarColumn()]
    if total is not None:
        columns.append(MofNCompleteColumn())
    columns.append(TimeElapsedColumn())
    bar = Progress(*columns, console=console, transient=True, disable=not (enabled and console.is_terminal))
    with bar:
        task = bar.add_task("starting", total=total)
        yield Bar(bar, task)
