"""What a command may use of this machine: the :class:`Resources` value the caller passes down.

Library code reads no environment variable: the CLI builds this value (``HETPLAN_PLAN_WORKERS``, read in
:func:`hetplan.cli.app.resources_from_env`) and passes it to :mod:`hetplan.api`, which passes it on; a Python
caller builds its own (the default: every usable core).

Source: hetplan's own reconstruction (issue 29: explicit context instead of environment variables).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Resources:
    """Machine resources a plan may use.

    Attributes:
        plan_workers: processes for independent planning tasks (the (engine, weight dtype) plans of
            ``--weight-dtype auto``, the analysis computed beside the simulated check); None: the usable cores
            (:func:`hetplan.executors.default_workers`); 1: one after another in the calling process.

    Raises:
        ValueError: ``plan_workers`` below 1 (the CLI checks its variable first, with a message naming it).
    """

    plan_workers: int | None = None

    def __post_init__(self) -> None:
        if self.plan_workers is not None and self.plan_workers < 1:
            raise ValueError(f"plan_workers must be >= 1, got {self.plan_workers}")

    def serial(self) -> Resources:
        """These resources with one planning process (for a caller that already runs one task per core)."""
        return Resources(plan_workers=1)


__all__ = ["Resources"]
