"""Workloads: the trace reader (planner and simulator), request streams and synthetic distributions."""

from hetplan.workload.model import ClassSlo, RequestStream, Workload, make_stream, stream_from_workload
from hetplan.workload.readers import load_workload, read_stream
from hetplan.workload.synthetic import SYNTHETIC_CLASSES, synthetic_workload

__all__ = [
    "SYNTHETIC_CLASSES",
    "ClassSlo",
    "RequestStream",
    "Workload",
    "load_workload",
    "make_stream",
    "read_stream",
    "stream_from_workload",
    "synthetic_workload",
]
