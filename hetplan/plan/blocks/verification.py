"""The ``verification`` block of a plan: the simulated check of ``hetplan plan --verify`` (:mod:`hetplan.sim.verify`,
:mod:`hetplan.planning.verify`): the verdict, the runs in sample and out of sample, the re-size and the cheaper
search, and the check against the performance model's own error. Latencies in seconds, rates in req/s, money in
$/hour, attainment as a fraction (0-1).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from pydantic import Field

from hetplan.plan.blocks.base import Block, Num
from hetplan.plan.blocks.cascade import CascadeSettings


class Attainment(Block):
    """The share of requests (0-1) meeting the TTFT SLO, the TPOT SLO and both (``joint``)."""

    ttft: Num | None = None
    tpot: Num | None = None
    joint: Num | None = None


class ClassCheck(Block):
    """One request class at the target rate, against its own SLOs (seconds); None where the block lacks a field."""

    class_: str | None = Field(default=None, alias="class")
    requests: int | None = None
    ttft_slo_s: Num | None = None
    tpot_slo_s: Num | None = None
    attainment: Num | None = None
    ttft_p_s: Num | None = None
    tpot_p_s: Num | None = None
    holds: bool | None = None


class Run(Block):
    """One in-sample run at a rate (``label``: ``"at target"``, ``"2x burst"``...): its attainment and latencies at
    the plan's percentile (``ttft_q_s`` / ``tpot_q_s``) and what it missed."""

    label: str = ""
    rate_scale: Num | None = None
    rate_req_per_s: Num | None = None
    attainment: Attainment | None = None
    ttft_q_s: Num | None = None
    tpot_q_s: Num | None = None
    misses: list[str] = Field(default_factory=list)
    class_checks: list[ClassCheck] = Field(default_factory=list)


class HeldOutRun(Block):
    """One out-of-sample run: another workload (``trace``) at a rate; its joint attainment and latencies (None
    where the block lacks a field)."""

    label: str | None = None
    trace: str = ""
    requests: int | None = None
    arrivals: str = ""
    rate_req_per_s: Num | None = None
    attainment: Num | None = None
    ttft_p_s: Num | None = None
    tpot_p_s: Num | None = None
    misses: list[str] = Field(default_factory=list)
    simulated_capacity_req_per_s: Num | None = None
    capacity_at_least_req_per_s: Num | None = None


class OutOfSample(Block):
    """The out-of-sample check: ``holds``, ``misses`` or why it did not run (None: not written); its runs and how
    the trace was split."""

    status: str | None = None
    runs: list[HeldOutRun] = Field(default_factory=list)
    split: str | None = None


class AtConfidence(Block):
    """The plan simulated with steps as slow as the model's error band."""

    attainment: Num | None = None
    ttft_p_s: Num | None = None
    tpot_p_s: Num | None = None
    misses: list[str] = Field(default_factory=list)


class ModelError(Block):
    """The check against the performance model's own error at ``confidence`` (None where the block lacks a
    field)."""

    confidence: str | None = None
    band_ttft: Num | None = None
    band_tpot: Num | None = None
    band_scope: str | None = None
    holds_at_confidence: bool | None = None
    at_confidence: AtConfidence | None = None
    margin_step_slowdown: Num | None = None
    margin_capped: bool | None = None
    summary: str | None = None


class SimulatedPrefixCache(Block):
    """Prefix-cache hits the simulator counted (:mod:`hetplan.sim.prefix`) under the router it used."""

    lookup_tokens: int = 0
    hit_tokens: int = 0
    token_hit_rate: Num | None = None
    hit_blocks: int = 0
    miss_blocks: int = 0
    evicted_blocks: int = 0
    router: str = ""


class HeldOutHold(Block):
    """A cheaper candidate's out-of-sample run: its joint attainment and whether it holds."""

    label: str = ""
    joint_attainment: Num | None = None
    holds: bool = False


class CheaperTry(Block):
    """One candidate of the cheaper search (a headroom below the verified one)."""

    headroom: Num | None = None
    usd_per_hour: Num | None = None
    deployment: str | None = None
    infeasible: str | None = None
    status: str | None = None
    joint_attainment: Num | None = None
    out_of_sample: list[HeldOutHold] = Field(default_factory=list)
    misses: list[str] = Field(default_factory=list)


class CheaperSearch(Block):
    """The search for a cheaper verified plan below a verified one (``hetplan.planning.verify``)."""

    from_usd_per_hour: Num | None = None
    method: str = ""
    tried: list[CheaperTry] = Field(default_factory=list)
    usd_per_hour_kept: Num | None = None


class ResizeAttempt(Block):
    """One re-size attempt: the headroom, its cost, the capacities measured and its verdict."""

    headroom: Num | None = None
    usd_per_hour: Num | None = None
    status: str | None = None
    joint_attainment: Num | None = None
    analytic_capacity_req_per_s: Num | None = None
    simulated_capacity_req_per_s: Num | None = None
    out_of_sample_capacity_req_per_s: Num | None = None
    dropped: int | None = None
    misses: list[str] = Field(default_factory=list)
    infeasible: str | None = None


class ShapeResize(Block):
    """One shape's re-size with ``--strategy all``: its verified cost and headroom, or why it was skipped."""

    strategy: str = ""
    usd_per_hour: Num | None = None
    headroom: Num | None = None
    plans_tried: int | None = None
    skipped: str | None = None
    infeasible: str | None = None


class Resized(Block):
    """The re-size: the plan before and after, every attempt and (``--strategy all``) every shape's outcome."""

    attempts: list[ResizeAttempt] = Field(default_factory=list)
    analytic_capacity_before_req_per_s: Num | None = None
    simulated_capacity_before_req_per_s: Num | None = None
    out_of_sample_capacity_before_req_per_s: Num | None = None
    headroom_asked: Num | None = None
    headroom_used: Num | None = None
    usd_per_hour_before: Num | None = None
    usd_per_hour_after: Num | None = None
    strategy_before: str | None = None
    strategy_after: str | None = None
    per_strategy: list[ShapeResize] = Field(default_factory=list)
    method: str = ""


class Verification(Block):
    """The simulated check of a plan (see the module docstring). ``status``: ``verified`` or ``not verified``.

    A field the block does not carry reads as None (lists as empty; ``classes`` as None) so readers can tell
    "not written" (a block from an older hetplan) from a written value."""

    attainment_by_class: dict[str, Num | None] | None = None
    jain_index: Num | None = None
    classes: list[ClassCheck] | None = None
    cascade: CascadeSettings | None = None
    status: str | None = None
    in_sample_status: str | None = None
    out_of_sample: OutOfSample | None = None
    verdict: str | None = None
    trace: str = ""
    requests: int | None = None
    arrivals: str | None = None
    policy: str | None = None
    percentile: Num | None = None
    #: the joint attainment (0-1); plans written before ``attainment_by_slo`` existed hold the map here
    attainment: Num | Attainment | None = None
    attainment_by_slo: Attainment | None = None
    ttft_p_s: Num | None = None
    tpot_p_s: Num | None = None
    analytic_capacity_req_per_s: Num | None = None
    simulated_capacity_req_per_s: Num | None = None
    capacity_ratio: Num | None = None
    out_of_sample_capacity_req_per_s: Num | None = None
    target_req_per_s: Num | None = None
    trace_rate_req_per_s: Num | None = None
    rate_scale: Num | None = None
    runs: list[Run] = Field(default_factory=list)
    unfinished: int | None = None
    dropped: int | None = None
    left_out_over_context: int = 0
    truncated_at_context: int = 0
    tpot_ineligible: int = 0
    goodput_req_per_s: Num | None = None
    goodput_definition: str | None = None
    summary: str | None = None
    misses: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    prefix_cache: SimulatedPrefixCache | None = None
    cheaper_search: CheaperSearch | None = None
    resized: Resized | None = None
    model_error: ModelError | None = None

    @property
    def verified(self) -> bool:
        """True when the plan held its SLOs in simulation."""
        return self.status == "verified"

    @property
    def joint_attainment(self) -> float | None:
        """The joint attainment (0-1) when the block records it as a number (None for an older block's map)."""
        return self.attainment if isinstance(self.attainment, int | float) else None

    @property
    def attainment_shares(self) -> Attainment | None:
        """The TTFT, TPOT and joint attainment (0-1): ``attainment_by_slo``, or an older block's ``attainment``
        map (written before the verdict existed); None when the block has neither."""
        if "attainment_by_slo" in self.model_fields_set:
            return self.attainment_by_slo
        return self.attainment if isinstance(self.attainment, Attainment) else None

    @property
    def slo_held(self) -> bool | None:
        """False when the simulation recorded an SLO miss, True when it recorded none, None when the block has no
        ``misses`` list (it says nothing)."""
        return not self.misses if "misses" in self.model_fields_set else None

    @property
    def cascade_settings(self) -> CascadeSettings | None:
        """The ``cascade`` block typed (None when the plan was not verified under CASCADE's settings)."""
        return self.cascade

    def ttft_q_s(self, percentile: float) -> float | None:
        """The simulated p-``percentile`` TTFT in seconds: ``ttft_p_s``, or an older block's ``ttft_p90_s``-style
        field (written before the field named no percentile); None when neither is there (or it was null)."""
        return self._quantile_s("ttft", self.ttft_p_s, percentile)

    def tpot_q_s(self, percentile: float) -> float | None:
        """The simulated p-``percentile`` TPOT in seconds, like :meth:`ttft_q_s`."""
        return self._quantile_s("tpot", self.tpot_p_s, percentile)

    def _quantile_s(self, kind: str, value: float | None, percentile: float) -> float | None:
        if f"{kind}_p_s" in self.model_fields_set:
            return value
        older = (self.model_extra or {}).get(f"{kind}_p{percentile:g}_s")  # kept as written (extra="allow")
        return older if isinstance(older, int | float) or older is None else None


__all__ = [
    "AtConfidence",
    "Attainment",
    "CascadeSettings",
    "CheaperSearch",
    "CheaperTry",
    "ClassCheck",
    "HeldOutHold",
    "HeldOutRun",
    "ModelError",
    "OutOfSample",
    "Resized",
    "ResizeAttempt",
    "Run",
    "ShapeResize",
    "SimulatedPrefixCache",
    "Verification",
]
