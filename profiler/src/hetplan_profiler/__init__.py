"""hetplan-profiler: measure one device (a CUDA GPU, or the CPU to try the tool) and write hetplan's profile file.

The package only measures. It writes the raw figures, the device it ran on and the model shapes it was given
(:mod:`hetplan_profiler.run`), in the versioned format of ``profile.schema.json`` (checked before anything is
written, :mod:`hetplan_profiler.schema`); hetplan reads the file (``hetplan plan --profile``), matches the device to
its catalog and computes efficiency against the datasheet. It does not import hetplan, and only
:mod:`hetplan_profiler.bench` and :mod:`hetplan_profiler.allreduce` import torch, inside functions.

Install it alone on a GPU node, from a hetplan clone: ``pip install ./profiler``; run ``hetplan-profile --quick
--out gpu.yaml`` (or ``hetplan profile``, which calls it).
"""

__version__ = "0.2.0"
SCHEMA_VERSION = 2
"""The profile file version this package writes (see ``profile.schema.json``)."""
