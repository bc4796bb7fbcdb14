"""Workloads: trace readers and synthetic distributions yielding arrival rate and length distributions."""

from hetplan.workload.readers import SYNTHETIC_CLASSES, Workload, load_workload, synthetic_workload

__all__ = ["SYNTHETIC_CLASSES", "Workload", "load_workload", "synthetic_workload"]
