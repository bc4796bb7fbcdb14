"""Summary of an emit run (``hetplan emit``, and ``--emit`` of plan and autoscale)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetplan.cli.render.format import count_noun

if TYPE_CHECKING:
    from hetplan.emit.writer import EmitResult


def render_result(result: EmitResult) -> str:
    """Plain-text summary of an emit run (what the command prints without --json)."""
    from hetplan.emit.writer import MANIFEST

    counts: dict[str, int] = {}
    for entry in result.files:
        counts[entry.target] = counts.get(entry.target, 0) + 1
    per_target = ", ".join(f"{t} {counts.get(t, 0)}" for t in result.targets)
    lines = [f"wrote {count_noun(len(result.files), 'file')} to {result.out_dir} ({per_target}) and {MANIFEST}"]
    report = result.validation
    if report is not None:
        kinds = ", ".join(f"{k} {n}" for k, n in report.by_kind().items())
        objects = f"{count_noun(len(report.objects), 'object')} ({kinds})" if report.objects else "no objects"
        lines.append(
            f"validated offline: {objects} and {count_noun(len(report.scripts), 'shell script')}: "
            + ("all passed" if report.ok else count_noun(len(report.errors), "error"))
        )
        lines.append(
            f"  core kinds: kubernetes-validate --strict against Kubernetes {report.kubernetes_version}; custom "
            "kinds: jsonschema against the CRD schemas shipped with hetplan, unknown fields rejected; shell "
            "scripts: bash -n"
        )
        lines.append("not checked offline:")
        lines += [f"  - {item}" for item in report.not_checked]
    else:
        lines.append("not validated (pass --validate to check every manifest offline)")
    lines += [f"note: {note}" for note in result.notes]
    return "\n".join(lines)
