"""Shared fixtures: paths to shipped examples and small synthetic GPUs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from types import ModuleType

    from hetplan.catalog.context import Catalog

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
    and Lambda prices), so a unit test does not change meaning when ``catalogs/`` is refreshed: its folder, set as
    ``HETPLAN_CATALOG_DIR`` for the CLI; library calls take ``small`` (the :class:`Catalog` value) as ``catalog=``."""
    folder = FIXTURES / "catalog"
    monkeypatch.setenv("HETPLAN_CATALOG_DIR", str(folder))  # for the CLI, which reads it at every command
    yield folder


@pytest.fixture
def small(small_catalog: Path) -> Catalog:
    """:func:`small_catalog` as the value library calls take (``catalog=``)."""
    from hetplan.catalog.context import Catalog

    return Catalog.from_folder(small_catalog)


@pytest.fixture
def cp(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """``benchmarks/calibrate_perf.py`` imported as a module (benchmarks are scripts, not a package); the modules it
    pulled in are dropped afterwards so each test imports them afresh."""
    import importlib
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    module = importlib.import_module("calibrate_perf")
    yield module
    for name in ("calibrate_perf", "kernel_curves", "silicon"):
        sys.modules.pop(name, None)
