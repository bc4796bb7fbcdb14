"""The report as stable JSON: the report document itself.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from typing import Any

from hetplan.io import to_json


def render_json(report: dict[str, Any]) -> str:
    """The report document as stable JSON."""
    return to_json(report)
