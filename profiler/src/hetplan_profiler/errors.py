"""The profiler's one expected failure: a message in three parts (what, why, how to fix), like hetplan's errors.

``hetplan profile`` turns it into hetplan's ``InputError`` (exit 2); ``hetplan-profile`` prints it and exits 2.
"""

from __future__ import annotations


class ProfilerError(Exception):
    """Bad input (device, model shapes, output path) or a device that cannot be measured."""

    exit_code = 2

    def __init__(self, what: str, why: str = "", fix: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.why = why
        self.fix = fix

    def render(self) -> str:
        """The three-part message as plain text."""
        lines = [f"Error: {self.what}"]
        if self.why:
            lines.append(f"Why: {self.why}")
        if self.fix:
            lines.append(f"To fix: {self.fix}")
        return "\n".join(lines)
