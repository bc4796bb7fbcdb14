"""Scheduling policies of the simulator by name: the registry ``SCHEDULERS`` and :func:`get_scheduler`.

``hetplan simulate --policy``, ``calibrate`` and ``plan --verify-policy`` resolve names here. Each entry is a
:class:`~hetplan.sim.scheduler.Scheduler` class (the interface and the static-key policies FCFS, SJF, EDF are in
:mod:`hetplan.sim.scheduler`, CASCADE in :mod:`hetplan.sim.cascade`); a new policy is a subclass added here.

Policies whose class says ``oracle = True`` (``oracle-sjf-total``) read a request's true output length: they are
references to compare against, never something a deployment can run.

Source: hetplan's own.
"""

from __future__ import annotations

from hetplan.errors import InputError
from hetplan.sim.cascade import CascadeScheduler, CascadeSettings
from hetplan.sim.scheduler import EdfScheduler, FcfsScheduler, Scheduler, SjfScheduler, SjfTotalScheduler

SCHEDULERS: dict[str, type[Scheduler]] = {
    cls.name: cls for cls in (FcfsScheduler, SjfScheduler, SjfTotalScheduler, EdfScheduler, CascadeScheduler)
}
POLICIES: dict[str, str] = {name: cls.description for name, cls in SCHEDULERS.items()}
"""Policy name → one-line description."""
ALIASES: dict[str, str] = {"sjf-total": "oracle-sjf-total"}
"""Former names still accepted → the policy's name (the oracle SJF was renamed to say what it is)."""


def policy_label(name: str) -> str:
    """How outputs name the policy ``name``: lower case, a former name given as the policy's own
    (``sjf-total`` → ``oracle-sjf-total``)."""
    kind = name.lower()
    return ALIASES.get(kind.strip(), kind)


def get_scheduler(name: str, cascade: CascadeSettings | None = None) -> Scheduler:
    """The policy called ``name`` (case-insensitive, surrounding spaces ignored); ``cascade`` sets CASCADE's
    κ, q₂ and host tiers (default :class:`CascadeSettings`), other policies ignore it.

    Raises:
        InputError: unknown name (the message lists the known ones).
    """
    kind = name.lower().strip()
    kind = ALIASES.get(kind, kind)
    if kind not in SCHEDULERS:
        raise InputError(
            f"unknown policy {name!r}", f"known: {', '.join(SCHEDULERS)}", f"pass --policy {'|'.join(SCHEDULERS)}"
        )
    return SCHEDULERS[kind].create(cascade)


__all__ = ["ALIASES", "POLICIES", "SCHEDULERS", "policy_label", "CascadeSettings", "get_scheduler"]
