"""Writing emitted files: rules, optional validation, then atomic writes plus ``manifest.json``.

Nothing is written unless every rule holds, validation (when asked) passes, and no output file would be
overwritten without ``force``. Same plan and settings -> byte-identical files and manifest.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hetplan import __version__, budget
from hetplan.emit import build_ir, deployable_targets, parse_targets, render
from hetplan.emit.settings import EmitSettings
from hetplan.emit.validate import ValidationReport, check_kubernetes_version, validate_files
from hetplan.errors import EmitRuleError, InputError
from hetplan.io import check_output, remove_created, to_json, write_atomic
from hetplan.plan.types import Plan

MANIFEST = "manifest.json"
MAX_ERRORS_SHOWN = 8


@dataclass(frozen=True)
class ManifestEntry:
    """One written file: path relative to the output folder, its target, SHA-256 of its bytes (hex)."""

    file: str
    target: str
    sha256: str


@dataclass(frozen=True)
class EmitResult:
    """What ``hetplan emit`` did: the folder, the targets, every file written (manifest order), the validation
    report (``None`` without ``validate``) and notes the user should read."""

    out_dir: str
    targets: tuple[str, ...]
    files: tuple[ManifestEntry, ...]
    validation: ValidationReport | None
    notes: tuple[str, ...]

    def to_doc(self) -> dict[str, Any]:
        """JSON-ready form (``hetplan emit --json``)."""
        return {
            "out_dir": self.out_dir,
            "targets": list(self.targets),
            "files": [{"file": e.file, "target": e.target, "sha256": e.sha256} for e in self.files],
            "manifest": MANIFEST,
            "validation": None if self.validation is None else self.validation.to_doc(),
            "notes": list(self.notes),
        }


def manifest_doc(
    plan_name: str, strategy: str, model: str, targets: tuple[str, ...], entries: list[ManifestEntry]
) -> dict[str, Any]:
    """The ``manifest.json`` document: no timestamps, files sorted by path."""
    return {
        "schema_version": 1,
        "kind": "emit-manifest",
        "hetplan_version": __version__,
        "plan": plan_name,
        "strategy": strategy,
        "model": model,
        "targets": list(targets),
        "files": [
            {"file": e.file, "target": e.target, "sha256": e.sha256} for e in sorted(entries, key=lambda e: e.file)
        ],
    }


def emit_plan(
    plan: Plan,
    out_dir: str | Path,
    targets: Iterable[str] = ("all",),
    settings: EmitSettings | None = None,
    validate: bool = False,
    force: bool = False,
) -> EmitResult:
    """Build the IR of the typed ``plan``, check the rules, render ``targets``, optionally validate, then write.

    Raises:
        InputError: bad plan, settings or targets; ``out_dir`` is not a folder; an output exists without ``force``.
        WorkBudgetError: more than :data:`hetplan.budget.MAX_EMIT_UNITS` combos and instance types.
        EmitRuleError: the plan breaks a deployment rule, or the files fail offline validation.
    """
    settings = settings or EmitSettings()
    parse_targets(targets)  # an unknown target is refused before the plan is read
    # the work budget (hetplan.budget): each combo or instance type is a few files per target (a plan edited to
    # 3,000 combos wrote 24,000 files in 3.5 minutes; a 64 MiB plan file holds about 50,000)
    units = len(plan.combos) + len(plan.instances)
    if units > budget.MAX_EMIT_UNITS:
        raise budget.refuse(
            "emitting the plan", units, budget.MAX_EMIT_UNITS, "combos and instance types",
            "emit a plan with fewer combos (plans hetplan makes have a few)",
        )  # fmt: skip
    ir = build_ir(plan, settings)
    chosen = deployable_targets(ir, targets)
    rendered = render(ir, chosen)
    report = None
    if validate:
        check_kubernetes_version(settings.kubernetes_version)
        report = validate_files(
            {path: text for path, (_, text) in rendered.items()},
            settings.kubernetes_version,
            engine=(ir.engine, ir.engine_version),
        )
        if not report.ok:
            shown = "; ".join(report.errors[:MAX_ERRORS_SHOWN])
            more = len(report.errors) - MAX_ERRORS_SHOWN
            raise EmitRuleError(
                f"{len(report.errors)} emitted object(s) fail offline validation; nothing was written",
                shown + (f"; and {more} more" if more > 0 else ""),
                "check the settings named in the errors (labels, names, images); otherwise report a hetplan bug",
                rule="validation",
            )
    out = Path(str(out_dir))
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a folder", fix="pass a folder path (created if missing)")
    for rel in [*rendered, MANIFEST]:
        check_output(out / rel, force)  # refuse before anything is written
    entries: list[ManifestEntry] = []
    created: list[Path] = []  # files and folders this run made, removed again if it stops half-way
    try:
        for rel, (target, text) in rendered.items():
            path = out / rel
            for folder in reversed([path.parent, *path.parent.parents]):
                if not folder.exists():
                    created.append(folder)
            if not path.exists():
                created.append(path)
            write_atomic(path, text, force=True)
            if rel.endswith(".sh"):
                os.chmod(path, stat.S_IMODE(path.stat().st_mode) | 0o111)
            entries.append(ManifestEntry(rel, target, hashlib.sha256(text.encode("utf-8")).hexdigest()))
        doc = manifest_doc(ir.name, ir.strategy, ir.model.name, chosen, entries)
        if not (out / MANIFEST).exists():
            created.append(out / MANIFEST)
        write_atomic(out / MANIFEST, to_json(doc), force=True)
    except BaseException:  # a full disk, Ctrl-C, SIGTERM: leave no half-written deployment behind
        remove_created(created)
        raise
    return EmitResult(str(out), chosen, tuple(entries), report, ir.notes)
