"""Render the typed report (:class:`hetplan.report.types.Report`) as JSON, Markdown (fits a pull-request comment),
self-contained HTML or rich tables: one module per format (:mod:`~hetplan.report.render.json`,
:mod:`~hetplan.report.render.markdown`, :mod:`~hetplan.report.render.html`, :mod:`~hetplan.report.render.terminal`)
over the cells, rows and notes they all show (:mod:`~hetplan.report.render.common`,
:mod:`~hetplan.report.render.checks`, :mod:`~hetplan.report.render.decision`);
:mod:`~hetplan.report.render.formats` picks the format.

Every renderer is a pure function of the report, so equal plans give byte-identical reports.

Source: hetplan's own reconstruction.
"""
