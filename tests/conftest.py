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
    from hetplan.catalog import loader

    folder = FIXTURES / "catalog"
    monkeypatch.setenv("HETPLAN_CATALOG_DIR", str(folder))  # for the CLI, which reads it at every command
    loader.use_catalog_dir(folder)  # for the library, which does not
    yield folder
    loader.use_catalog_dir(None)


@pytest.fixture(autouse=True)
def _shipped_catalog_after_each_test() -> Iterator[None]:
    """Point the loader back at the shipped catalogs after a test that chose another folder (directly, or through
    a CLI run with ``HETPLAN_CATALOG_DIR`` set): the choice is process-wide and must not leak into the next test."""
    yield
    import sys

    loader = sys.modules.get("hetplan.catalog.loader")
    if loader is not None:
        loader.use_catalog_dir(None)
