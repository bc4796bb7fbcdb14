"""Typed views of the benchmark tools' files that ``hetplan calibrate-perf`` reads
(:mod:`hetplan.perf.calibration_readers`): vllm bench serve ``--save-result``, GuideLLM's report and its
benchmarks, AIPerf / genai-perf's profile export. Each view holds the fields hetplan reads, values as written
(``Any``): the readers check each where they use it, with a message naming the field; a level that is missing or
not a mapping reads as absent (:func:`view`).

Source: vllm-project/vllm ``vllm/benchmarks/serve.py``, vllm-project/guidellm
``src/guidellm/benchmark/schemas/generative/report.py``, ai-dynamo/aiperf ``aiperf/exporters/json_exporter.py``
(tests/fixtures/user_calibration/README.md).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict


class View(BaseModel):
    """A typed view of a tool's file: the fields hetplan reads, values as written (checked where they are used)."""

    model_config = ConfigDict(frozen=True, extra="ignore")


V = TypeVar("V", bound=View)


class VllmBenchResult(View):
    """The fields hetplan reads of a ``vllm bench serve --save-result`` file (``vllm/benchmarks/serve.py``), as
    written (each value is checked where it is used; ``--metadata`` pairs are read from the file itself)."""

    mean_ttft_ms: Any
    mean_tpot_ms: Any
    completed: Any
    total_input_tokens: Any
    total_output_tokens: Any
    max_concurrency: Any = None
    backend: Any = ""
    model_id: Any = None


class Report(View):
    """A GuideLLM report: its benchmarks and the ``args`` it ran with."""

    benchmarks: Any = None
    args: Any = None


class ReportArgs(View):
    model: Any = None


class Benchmark(View):
    """One GuideLLM benchmark: its strategy (under ``config``, older reports ``args``), metrics and worker."""

    config: Any = None
    args: Any = None
    metrics: Any = None
    worker: Any = None


class StrategyHolder(View):
    strategy: Any = None


class Strategy(View):
    type_: Any = ""
    streams: Any = None


class Worker(View):
    backend_model: Any = None


def view(model: type[V], value: Any) -> V:
    """``value`` read through ``model`` when it is a mapping, else ``model``'s defaults (a level that is missing
    or not a mapping reads as absent)."""
    return model.model_validate(value) if isinstance(value, dict) else model()


class AiperfExport(View):
    """An AIPerf / genai-perf profile export: its ``records`` (genai-perf: the metrics at the top level) and
    ``input_config``."""

    records: Any = None
    input_config: Any = None


class AiperfMetric(View):
    avg: Any = None
    unit: Any = None


class InputConfig(View):
    loadgen: Any = None
    endpoint: Any = None
    concurrency: Any = None
    model_names: Any = None
    model: Any = None


class Loadgen(View):
    concurrency: Any = None


class Endpoint(View):
    model_names: Any = None


__all__ = [
    "AiperfExport",
    "AiperfMetric",
    "Benchmark",
    "Endpoint",
    "InputConfig",
    "Loadgen",
    "Report",
    "ReportArgs",
    "Strategy",
    "StrategyHolder",
    "VllmBenchResult",
    "View",
    "Worker",
    "view",
]
