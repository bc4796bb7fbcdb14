"""``benchmarks/kernel_curves.py`` reads the collected all-reduce tables' ``message_size`` as elements of their
dtype (AIConfigurator's tables count elements: the NCCL table's int8 rows run faster than its half rows of the same
``message_size``), and ``hetplan-profile`` tables as bytes. Read as bytes, the fitted ``link_efficiency`` came out
half the true one. The tables are built here; no test reads ../shared."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pytest

from hetplan.catalog.loader import find_gpu
from tests.conftest import ROOT

LINK_EFFICIENCY = 0.8
LATENCY_S = 1.2e-5


@pytest.fixture
def kc(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    module = importlib.import_module("kernel_curves")
    yield module
    sys.modules.pop("kernel_curves", None)


def _write(root: Path, engine: str, element_bytes: float) -> None:
    """A custom_allreduce_perf table of an all-reduce at exactly :data:`LINK_EFFICIENCY` of H200's link, its
    ``message_size`` counted in units of ``element_bytes`` bytes."""
    link = find_gpu("H200-SXM").interconnect_gb_per_s / 2.0 * 1e9
    rows = []
    for n in (2, 4, 8):
        for size in 2 ** np.arange(12, 27):
            t = LATENCY_S + 2 * (n - 1) / n * size * element_bytes / (LINK_EFFICIENCY * link)
            rows.append({"framework": engine, "version": "1.0", "device": "NVIDIA H200", "op_name": "all_reduce",
                         "kernel_source": "test", "allreduce_dtype": "bfloat16", "num_gpus": n,
                         "message_size": int(size), "latency": t * 1e3, "backend": f"{engine}_graph"})  # fmt: skip
    folder = root / "h200_sxm" / "comm" / engine / "1.0"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "custom_allreduce_perf.csv", index=False)


def test_collected_tables_count_bf16_elements(kc: ModuleType, tmp_path: Path) -> None:
    _write(tmp_path, "vllm", element_bytes=2.0)
    fit = kc.fit_allreduce("h200_sxm", "vllm", find_gpu("H200-SXM"), tmp_path)
    assert fit is not None
    assert fit["values"]["link_efficiency"] == pytest.approx(LINK_EFFICIENCY, rel=0.02)
    assert fit["values"]["allreduce_latency_s"] == pytest.approx(LATENCY_S, rel=0.05)


def test_profiler_tables_count_bytes(kc: ModuleType, tmp_path: Path) -> None:
    _write(tmp_path, kc.PROFILER, element_bytes=1.0)
    fit = kc.fit_allreduce("h200_sxm", kc.PROFILER, find_gpu("H200-SXM"), tmp_path)
    assert fit is not None
    assert fit["values"]["link_efficiency"] == pytest.approx(LINK_EFFICIENCY, rel=0.02)


def test_element_bytes_per_dtype(kc: ModuleType) -> None:
    dtypes = pd.Series(["bfloat16", "half", "int8", "float32", "something-new"])
    assert kc.message_element_bytes(dtypes, "vllm").tolist() == [2.0, 2.0, 1.0, 4.0, 2.0]
    assert kc.message_element_bytes(dtypes, kc.PROFILER).tolist() == [1.0] * 5
