"""Orchestration: scenario → request (:mod:`.request`) → solvers (:mod:`.solve`) → typed plan (:mod:`.pipeline`)
→ verification (:mod:`.verify`); autoscaling schedules (:mod:`.autoscale`) and Hetis pool plans (:mod:`.hetis`).

Import the submodule you need; this package imports nothing heavy itself.
"""

from hetplan.plan.types import STRATEGIES

__all__ = ["STRATEGIES"]
