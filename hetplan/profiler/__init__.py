"""``hetplan profile``: GPU microbenchmarks (torch, imported lazily in :mod:`hetplan.profiler.bench` only), profile
files, the A1/A2 cost-efficiency fit and Kubernetes Jobs that profile a fleet.

Only :mod:`hetplan.profiler.bench` and :mod:`hetplan.profiler.allreduce` import torch, inside functions, so the
rest of hetplan (and ``hetplan --help``) works without it; install it with ``pip install ".[profile]"`` from a
hetplan checkout (torch; a CPU build is enough to try it).
"""
