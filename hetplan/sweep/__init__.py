"""``hetplan sweep``: a grid of what-if plans (and their simulated checks), run on a process pool or on Ray.

- :mod:`hetplan.sweep.axes`: the axes a grid may vary and the scenario field (or plan option) each one sets.
- :mod:`hetplan.sweep.grid`: the grid file, its expansion into cases (a product of axes and/or explicit cases)
  and each case's inputs hash.
- :mod:`hetplan.sweep.case`: one case, as a task a worker runs (plan, then verify when the workload is a trace).
- :mod:`hetplan.sweep.table`: one row per case; the CSV and Parquet tables.
- :mod:`hetplan.sweep.report`: the cheapest plan per group and the Pareto front of cost against goodput and SLO,
  as Markdown and HTML.
- :mod:`hetplan.sweep.run`: the driver: resume, executor, progress, outputs, Ctrl-C.

Source: hetplan's own reconstruction.
"""
