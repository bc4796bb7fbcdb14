"""Scenario files: what ``hetplan plan examples/<scenario>.yaml`` reads.

Unknown keys are rejected so a typo is an error, not a silently ignored setting. Paths inside a scenario are
relative to the scenario file. Command-line flags override the file.

Example::

    schema_version: 1
    kind: scenario
    name: llama3-70b-azure-conv
    model: Llama-3-70B
    workload: {path: data/azure_conv_sample.csv}
    goodput_req_per_s: 5.5
    slo: {ttft: 2s, tpot: 100ms, percentile: 90}
    gpus: [H100, A100-80GB, L40S, L4, A10G]
    cloud: aws

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from hetplan.catalog.loader import read_yaml_file


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SyntheticSpec(_Strict):
    """A synthetic workload: one of Cauchy's classes (or ``custom`` with medians) at ``rate_per_s``."""

    kind: str = Field(default="balanced", alias="class")
    rate_per_s: float = Field(gt=0)
    requests: int = Field(default=2000, gt=0)
    seed: int = 0
    prompt_tokens_median: float | None = Field(default=None, gt=0)
    output_tokens_median: float | None = Field(default=None, gt=0)
    sigma: float = Field(default=0.6, gt=0)

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class WorkloadSpec(_Strict):
    """A trace file (``path`` + ``format``) or a ``synthetic`` distribution; ``rate_per_s`` overrides the
    trace's own rate (needed for length-only files)."""

    path: str | None = None
    format: Literal["auto", "azure", "mooncake", "lengths"] = "auto"
    rate_per_s: float | None = Field(default=None, gt=0)
    synthetic: SyntheticSpec | None = None


class SloSpec(_Strict):
    """SLOs: durations like ``2s`` or ``80ms``; ``percentile`` like 90 or 0.9."""

    ttft: str | float = "2s"
    tpot: str | float = "100ms"
    percentile: float | str = 90


class Scenario(_Strict):
    """A planning scenario (see module docstring)."""

    schema_version: Literal[1] = 1
    kind: Literal["scenario"] = "scenario"
    name: str = "scenario"
    description: str | None = None
    model: str
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    workload: WorkloadSpec
    goodput_req_per_s: float | None = Field(default=None, gt=0)
    slo: SloSpec = SloSpec()
    gpus: list[str] | None = None
    inventory: dict[str, int] = Field(default_factory=dict)
    cloud: str | None = None
    spot: bool = False
    prices: str | None = None
    headroom: float = Field(default=0.1, ge=0)
    tp: list[int] = Field(default_factory=lambda: [1, 2, 4, 8])
    max_ratio: int = Field(default=8, ge=1, le=32)
    max_ilp_combos: int = Field(default=20000, ge=1)
    base_dir: str = Field(default=".", exclude=True)

    def resolve(self, relative: str | None) -> str | None:
        """A path from the scenario, made relative to the scenario file's folder."""
        if relative is None:
            return None
        path = Path(relative)
        return str(path if path.is_absolute() else Path(self.base_dir) / path)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario YAML file.

    Raises:
        InputError / CatalogError: unreadable file or invalid fields (named in the message).
    """
    scenario = read_yaml_file(Path(path), Scenario, "scenario")
    return scenario.model_copy(update={"base_dir": str(Path(path).parent)})
