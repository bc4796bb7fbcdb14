"""The catalog is an explicit value passed down (issue 29, "explicit context"): no process-wide "catalog in use",
library code never falls back to the shipped-catalog shortcuts of :mod:`hetplan.catalog.loader`, and only the CLI
reads the environment."""

from __future__ import annotations

import ast
from pathlib import Path

import hetplan
from hetplan.catalog import context
from hetplan.catalog.loader import SHORTCUTS

PACKAGE = Path(hetplan.__file__).parent
#: Where the shortcuts are defined and re-exported.
OWNERS = {PACKAGE / "catalog" / "loader.py", PACKAGE / "catalog" / "__init__.py"}


def _imports_of_shortcuts(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module in ("hetplan.catalog.loader", "hetplan.catalog"):
            found += [f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {a.name}" for a in node.names
                      if a.name in SHORTCUTS]  # fmt: skip
    return found


def test_library_code_never_uses_the_shipped_catalog_shortcuts():
    """A name lookup, a price row or a hash in library code reads the catalog it was given, never the shipped one
    behind the caller's back (the shortcuts are for tests, benchmarks and scripts)."""
    used = [hit for path in sorted(PACKAGE.rglob("*.py")) if path not in OWNERS for hit in _imports_of_shortcuts(path)]
    assert used == []


def test_there_is_no_process_wide_catalog():
    assert not [name for name in ("in_use", "using", "install", "_IN_USE") if hasattr(context, name)]


def test_only_the_cli_reads_the_environment():
    readers = [
        f"{path.relative_to(PACKAGE.parent)}:{n}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "cli" not in path.relative_to(PACKAGE).parts
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "os.environ" in line or "os.getenv" in line
    ]
    assert readers == []
