"""The typed plan every stage after the planner reads (:class:`Plan`) and its file form (:mod:`hetplan.plan.doc`)."""

from hetplan.plan.deployment import AggregatedUnit, BucketShare, ComboUnit
from hetplan.plan.doc import SCHEMA_VERSION, check_plan, from_doc, load_plan, read_plan_doc, to_doc
from hetplan.plan.types import HOURS_PER_MONTH, Plan, Price, Provenance, ResolvedGpu, ResolvedModel, Slo, StrategyResult

__all__ = [
    "HOURS_PER_MONTH",
    "SCHEMA_VERSION",
    "AggregatedUnit",
    "BucketShare",
    "ComboUnit",
    "Plan",
    "Price",
    "Provenance",
    "ResolvedGpu",
    "ResolvedModel",
    "Slo",
    "StrategyResult",
    "check_plan",
    "from_doc",
    "load_plan",
    "read_plan_doc",
    "to_doc",
]
