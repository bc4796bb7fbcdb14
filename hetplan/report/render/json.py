"""The report as stable JSON: the report document itself.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from hetplan.io import to_json
from hetplan.report.types import Report


def render_json(report: Report) -> str:
    """The report document as stable JSON (:meth:`~hetplan.report.types.Report.to_doc`: the report's key order)."""
    return to_json(report.to_doc())
