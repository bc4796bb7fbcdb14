"""Typed, expected failures of hetplan.

Every error carries three parts that the CLI prints as ``Error:`` / ``Why:`` / ``To fix:``. Expected failures
(bad input, infeasible plan, out of memory) are :class:`HetplanError` subclasses; anything else is a bug and
shows a traceback only with ``--debug``.

Source: hetplan's own reconstruction (layout after aiconfigurator's ``sdk/errors.py``).
"""

from __future__ import annotations

from typing import Any


class HetplanError(Exception):
    """Base of all expected failures.

    Args:
        what: one line saying what failed.
        why: the numbers behind it, with units.
        fix: how the user can fix it.
        exit_code: 1 for an expected failure (infeasible, does not fit), 2 for bad usage or input.
    """

    exit_code = 1

    def __init__(self, what: str, why: str = "", fix: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.fix = fix

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle with what/why/fix and every other attribute (a planning task in a worker process,
        :mod:`hetplan.planning.forked`, hands its error back whole)."""
        return (_rebuild, (type(self), self.what, self.why, self.fix), self.__dict__)

    def render(self) -> str:
        """Return the three-part message as plain text."""
        lines = [f"Error: {self.what}"]
        if self.why:
            lines.append(f"Why: {self.why}")
        if self.fix:
            lines.append(f"To fix: {self.fix}")
        return "\n".join(lines)


def _rebuild(cls: type[HetplanError], what: str, why: str, fix: str) -> HetplanError:
    """Unpickle a :class:`HetplanError` of any subclass (its other attributes follow as state)."""
    err = HetplanError.__new__(cls)
    HetplanError.__init__(err, what, why, fix)
    return err


class InputError(HetplanError):
    """Bad user input: an unknown name, a malformed file, a value out of range (exit code 2)."""

    exit_code = 2


class CatalogError(InputError):
    """A catalog or user-supplied data file does not match its schema (exit code 2)."""


class OutOfMemoryError(HetplanError):
    """The model (weights plus KV reserve) does not fit the chosen GPU, TP and PP (exit code 1)."""


class InfeasibleError(HetplanError):
    """No deployment meets the goodput target under the SLOs and inventory; ``why`` names the binding
    constraint and by how much (exit code 1)."""


class OutputError(HetplanError):
    """An output could not be written (a full disk, a read-only folder); nothing half-written is left (exit
    code 1)."""


class OutputExistsError(InputError):
    """An output file exists and ``--force`` was not given (exit code 2)."""


class EmitRuleError(HetplanError):
    """A plan cannot be turned into a deployment: it breaks a serving-engine rule (KV connector TP pairing, block
    size or KV dtype mismatch, TP not dividing the heads, GPUs per instance, memory fit, unknown GPU node label), or
    the emitted files fail offline validation. ``rule`` names the broken rule; ``violations`` holds every broken
    rule as ``(rule, what, why, fix)`` (exit code 1)."""

    def __init__(
        self,
        what: str,
        why: str = "",
        fix: str = "",
        rule: str = "",
        violations: tuple[tuple[str, str, str, str], ...] = (),
    ) -> None:
        super().__init__(what, why, fix)
        self.rule = rule
        self.violations = violations
