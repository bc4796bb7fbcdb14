"""Render a report document as JSON, Markdown (fits a pull-request comment), self-contained HTML or rich tables:
one module per format (:mod:`~hetplan.report.render.json`, :mod:`~hetplan.report.render.markdown`,
:mod:`~hetplan.report.render.html`, :mod:`~hetplan.report.render.terminal`) over the cells, rows and notes they all
show (:mod:`~hetplan.report.render.common`).

Every renderer is a pure function of the report document, so equal plans give byte-identical reports.

Source: hetplan's own reconstruction.
"""
