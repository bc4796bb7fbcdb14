"""``hetplan sweep``: a grid of what-if plans (and their simulated checks), run on a process pool or on Ray.

- :mod:`hetplan.sweep.axes`: the axes a grid may vary and the scenario field (or plan option) each one sets.
- :mod:`hetplan.sweep.grid`: the grid file, its expansion into cases (a product of axes and/or explicit cases)
  and each case's inputs hash.
- :mod:`hetplan.sweep.case`: one case, as a task a worker runs (plan, then verify when the workload is a trace).
- :mod:`hetplan.sweep.planfacts`: what a row reads from a plan document, read once at the file edge.
- :mod:`hetplan.sweep.table`: one row per case (:class:`~hetplan.sweep.table.SweepRow`); the CSV and Parquet
  tables.
- :mod:`hetplan.sweep.report`: the cheapest plan per group and the Pareto front of cost against goodput and SLO
  (:class:`~hetplan.sweep.report.SweepReport`), as Markdown and HTML.
- :mod:`hetplan.sweep.outputs`: the table, report and ``summary.json``
  (:class:`~hetplan.sweep.outputs.SweepSummary`) written into the output folder.
- :mod:`hetplan.sweep.run`: the driver: resume, executor, progress, Ctrl-C.

Rows, the report and the summary are typed records read by attribute; mappings appear only at the edges (the grid
YAML, plan files, the CSV/Parquet/JSON outputs, and what :func:`hetplan.api.sweep` hands its caller).

Source: hetplan's own reconstruction.
"""
