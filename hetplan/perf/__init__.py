"""The performance model: architecture arithmetic, roofline latency and memory, capacities under SLOs, the fitted
engine curves and measured GPU figures."""
