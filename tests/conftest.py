"""Shared fixtures: paths to shipped examples and small synthetic GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

# Property-based tests: a fixed seed and few examples in CI (the default); --hypothesis-profile=fuzz for the long run.
settings.register_profile("ci", derandomize=True, max_examples=25, deadline=None, print_blob=True)
settings.register_profile("fuzz", max_examples=600, deadline=None, print_blob=True)
# What benchmarks/fuzz_report.py runs for docs/reliability.md: seeded random inputs, 10 to 17 min on 2 shared cores.
settings.register_profile("reliability", max_examples=60, deadline=None, print_blob=True)
settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
EXAMPLES = ROOT / "examples"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


@pytest.fixture
def small_catalog(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A frozen three-GPU catalog (``tests/fixtures/catalog``: H100-SXM, A100-80GB-SXM, L4; Llama-3-8B/70B; AWS
    and Lambda prices), so a unit test does not change meaning when ``catalogs/`` is refreshed."""
    from hetplan.catalog.context import Catalog, install

    folder = FIXTURES / "catalog"
    monkeypatch.setenv("HETPLAN_CATALOG_DIR", str(folder))  # for the CLI, which reads it at every command
    install(Catalog.from_folder(folder))  # for the library calls the test makes without a catalog
    yield folder
    install(None)


@pytest.fixture(autouse=True)
def _shipped_catalog_after_each_test() -> Iterator[None]:
    """Make the shipped catalogs the process's catalog again after a test that installed another one (directly, or
    through a CLI run with ``HETPLAN_CATALOG_DIR`` set), so it does not leak into the next test."""
    yield
    import sys

    context = sys.modules.get("hetplan.catalog.context")
    if context is not None:
        context.install(None)
