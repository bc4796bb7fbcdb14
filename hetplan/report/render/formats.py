"""Which report format to write (from ``--format`` or the output file's suffix) and the report in it as text.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path

from hetplan.errors import InputError
from hetplan.report.types import Report

FORMATS = ("term", "md", "html", "json")


def format_for(fmt: str | None, out: Path | None) -> str:
    """The report format: ``fmt`` (term, md, html or json), else from the suffix of ``out``, else ``term``.

    Raises:
        InputError: an unknown format or suffix, or ``term`` with an output file.
    """
    if fmt is None:
        if out is None:
            return "term"
        suffix = out.suffix.lower()
        fmt = {".md": "md", ".html": "html", ".htm": "html", ".json": "json"}.get(suffix)
        if fmt is None:
            raise InputError(
                f"cannot tell the format of {out}",
                "its suffix is not .md, .html or .json",
                "pass --format md|html|json, or name the file *.md, *.html or *.json",
            )
    fmt = fmt.lower()
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r} is not known", f"known: {', '.join(FORMATS)}", "pick one of them")
    if fmt == "term" and out is not None:
        raise InputError(
            "--format term prints tables to the terminal", fix="use --format md (or html, json) with --out"
        )
    return fmt


def render_text(report: Report, kind: str, gate_markdown: str = "") -> str:
    """The report as ``json``, ``md`` or ``html`` text, with the gate's Markdown summary when a gate ran (the JSON
    carries the gate in the report itself); "" for ``term`` (printed by
    :func:`hetplan.report.render.terminal.render_terminal`)."""
    if kind == "json":
        from hetplan.report.render.json import render_json

        return render_json(report)
    if kind == "md":
        from hetplan.report.render.markdown import render_markdown

        return render_markdown(report) + ("\n" + gate_markdown if gate_markdown else "")
    if kind == "html":
        from hetplan.report.render.html import render_html

        return render_html(report, gate_markdown)
    return ""
