"""Simulated instances rebuilt from a plan document, with step times from hetplan's performance model.

A plan file names, for each combo, the prefill and decode GPU, TP and counts and the decode batch; a Mélange plan
names aggregated instance types and the request-size buckets each serves. :func:`deployment_from_plan` rebuilds
the :class:`~hetplan.perf.latency.InstanceModel` of every instance from the plan's model, dtypes and
``perf_settings`` (the same objects the planner used), so the simulator and the planner share one roofline.

Step times (:class:`StepCost`) are *derived from* the performance model, never re-implemented:

- decode step ``decode_s(b, ctx_sum)``: ``InstanceModel.decode_step_latency_s(b, ctx_sum / b)`` tabulated once per
  instance type over b = 1..max_num_seqs and 129 context points, linearly interpolated in context. For fixed b
  the roofline is the max of two affine functions of context, so the table is exact except inside the one grid
  cell holding the kink.
- prefill step over n prompt pieces with T tokens and attention work Q (Σ of ``(k+c)² − k²`` for a chunk of c
  tokens after k already prefilled): the FLOPs of ``arch.prefill_flops`` are ``a·s + c·s² + lm`` per prompt (a
  quadratic read off the model by evaluating it at s = 0, 1, 2); the batch is priced as the model's
  ``prefill_latency_s(s_eq, n)`` with ``s_eq`` the equal prompt length of the same FLOPs. Memoised.
- a mixed step (prefill pieces plus decoding sequences, as vLLM runs them) costs ``prefill + decode − overhead``:
  one framework overhead per iteration. This mixing rule is hetplan's own reconstruction; the perf model prices
  pure prefill and pure decode iterations only.
- prefill→decode KV transfer: ``kv_transfer_s`` of the perf model over ``min(prefill NIC, decode NIC)``, the link
  the planner used; transfers from one prefill instance queue on its NIC.

Every step time includes the model's ``overhead_s`` and a memory-bandwidth floor, so it is never zero;
construction raises if a settings file made it zero.

Source: instance reconstruction and step pricing are hetplan's own; the split into entities (instances), events
and schedulers follows Vidur (Agrawal et al., MLSys 2024).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from hetplan.budget import check_sim_start
from hetplan.catalog.loader import find_gpu, find_model
from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel, kv_transfer_s, network_bytes_per_s
from hetplan.perf.settings import PerfSettings
from hetplan.plan.types import STRATEGIES, Plan
from hetplan.routing import RoutingTable, table_from_plan, table_from_units

CTX_POINTS = 128
#: Step costs kept across deployments (:func:`_shared_step_cost`): a verification builds a deployment per plan,
#: per replayed workload and per step slowdown, mostly of the same instances; the oldest half goes past this.
SHARED_STEP_COSTS = 64
_step_costs: dict[tuple[InstanceModel, int, int, float, float], StepCost] = {}


class StepCost:
    """Step times of one instance type, from its :class:`InstanceModel` (see the module docstring).

    Args:
        model: the instance's performance model.
        max_seqs: largest decode batch to tabulate (the engine's ``max_num_seqs``).
        max_context_tokens: context length up to which the decode table is built (beyond it, linear
            extrapolation of the last cell).

    Raises:
        InputError: a step time is not positive (settings with zero overhead and zero bandwidth floor).
    """

    def __init__(
        self,
        model: InstanceModel,
        max_seqs: int,
        max_context_tokens: int,
        prefill_scale: float = 1.0,
        decode_scale: float = 1.0,
    ) -> None:
        self.model = model
        self.prefill_scale, self.decode_scale = float(prefill_scale), float(decode_scale)
        self.overhead_s = float(model.overhead_s)
        arch = model.arch
        f0, f1, f2 = (float(arch.prefill_flops(float(s), 1.0)) for s in (0, 1, 2))
        self._quad = (f2 - 2 * f1 + f0) / 2.0
        self._lin = f1 - f0 - self._quad
        self._prefill_memo: dict[tuple[int, int], float] = {}
        self.max_seqs = max(1, int(max_seqs))
        self.ctx_step = max(1.0, float(max_context_tokens) / CTX_POINTS)
        b = np.arange(1, self.max_seqs + 1, dtype=float)[:, None]
        c = np.arange(CTX_POINTS + 1, dtype=float)[None, :] * self.ctx_step
        table = np.asarray(model.decode_step_latency_s(b, c), dtype=float) * self.decode_scale
        if not np.all(table > 0) or self.prefill_s(1, 1, 1) <= 0:
            raise InputError(
                f"step time of {model.gpu.name} TP{model.tp} is not positive",
                "the performance settings give zero overhead and no bandwidth floor",
                "set step_overhead_s > 0 in the plan's perf_settings",
            )
        self._table: list[list[float]] = [[]] + table.tolist()
        self.kv_capacity_tokens = int(model.kv_capacity_tokens)

    def decode_s(self, batch: int, ctx_sum: float) -> float:
        """Seconds of one decode iteration of ``batch`` sequences holding ``ctx_sum`` tokens in total."""
        if batch > self.max_seqs:
            return float(self.model.decode_step_latency_s(batch, ctx_sum / batch)) * self.decode_scale
        row = self._table[batch]
        x = ctx_sum / batch / self.ctx_step
        i = int(x)
        if i >= CTX_POINTS:
            i = CTX_POINTS - 1
        lo = row[i]
        return lo + (row[i + 1] - lo) * (x - i)

    def prefill_s(self, tokens: float, attn_sq: float, pieces: int) -> float:
        """Seconds of one prefill iteration over ``pieces`` prompts (or chunks) with ``tokens`` tokens in total
        and attention work ``attn_sq`` (Σ s² for whole prompts; see the module docstring for chunks)."""
        n = max(1, pieces)
        work = (self._lin * tokens + self._quad * attn_sq) / n
        if self._quad > 0:
            s_eq = (-self._lin + math.sqrt(self._lin * self._lin + 4 * self._quad * work)) / (2 * self._quad)
        else:
            s_eq = work / self._lin
        key = (int(s_eq + 0.5), n)
        t = self._prefill_memo.get(key)
        if t is None:
            t = float(self.model.prefill_latency_s(max(key[0], 1), n)) * self.prefill_scale
            self._prefill_memo[key] = t
        return t

    def mixed_s(self, tokens: float, attn_sq: float, pieces: int, batch: int, ctx_sum: float) -> float:
        """One iteration with prefill pieces and ``batch`` decoding sequences (one overhead per iteration)."""
        if pieces == 0:
            return self.decode_s(batch, ctx_sum)
        if batch == 0:
            return self.prefill_s(tokens, attn_sq, pieces)
        overlap = self.overhead_s * min(self.prefill_scale, self.decode_scale)  # one overhead per iteration
        return self.prefill_s(tokens, attn_sq, pieces) + self.decode_s(batch, ctx_sum) - overlap


def _shared_step_cost(
    model: InstanceModel, max_seqs: int, max_context_tokens: int, prefill_scale: float, decode_scale: float
) -> StepCost:
    """The :class:`StepCost` of these arguments, built once per process while it is among the last
    :data:`SHARED_STEP_COSTS` (a step cost is a pure function of them: its table and prefill memo are the same
    whichever deployment asks; building one takes tens of milliseconds).

    Raises:
        InputError: as :class:`StepCost`.
    """
    key = (model, max_seqs, max_context_tokens, prefill_scale, decode_scale)
    cost = _step_costs.get(key)
    if cost is None:
        if len(_step_costs) >= SHARED_STEP_COSTS:
            for old in list(_step_costs)[: SHARED_STEP_COSTS // 2]:
                del _step_costs[old]
        cost = _step_costs[key] = StepCost(model, max_seqs, max_context_tokens, prefill_scale, decode_scale)
    return cost


@dataclass(frozen=True)
class InstanceSpec:
    """One simulated engine instance.

    Attributes:
        name: unique label, e.g. ``c0.0/p1`` (combo 0, copy 0, prefill instance 1).
        role: ``prefill``, ``decode`` or ``aggregated``.
        gpu / tp: GPU type and tensor-parallel degree.
        max_num_seqs: cap on running sequences (a decode instance: the plan's decode batch).
        max_num_batched_tokens: cap on tokens in one iteration.
        group: index of the routing group: the combo (disaggregated) or the instance type (aggregated).
        network_bytes_per_s: the instance's scale-out bandwidth for KV transfer, bytes/s.
    """

    name: str
    role: str
    gpu: str
    tp: int
    max_num_seqs: int
    max_num_batched_tokens: int
    group: int
    network_bytes_per_s: float


@dataclass(frozen=True)
class Group:
    """A unit the router balances over: a combo with all its copies (prefill → decode) or an aggregated instance
    type. Inside a group each role's instances share one queue (:mod:`hetplan.sim.dispatch`).

    Attributes:
        label: readable name. weight_req_per_s: planned goodput of all its copies (routing weight).
        prefill / decode: instance indices (aggregated: both hold the same instances).
        buckets: Mélange and mixed plans, ``(prompt_lo, prompt_hi, output_lo, output_hi, share)`` the unit was
            sized for; the router reads them only as prompt ranges (:mod:`hetplan.routing`).
        link_bytes_per_s: prefill→decode link (disaggregated), bytes/s.
        extra_latency_s: latency added to each KV transfer (a cross-site combo's WAN, ``--allow-cross-provider``).
    """

    label: str
    weight_req_per_s: float
    prefill: tuple[int, ...]
    decode: tuple[int, ...]
    buckets: tuple[tuple[float, float, float, float, float], ...] = ()
    link_bytes_per_s: float = 0.0
    extra_latency_s: float = 0.0


@dataclass
class Deployment:
    """Instances and routing groups of a plan, with the shared model and settings."""

    arch: ModelArch
    settings: PerfSettings
    instances: list[InstanceSpec]
    groups: list[Group]
    aggregated: bool
    ttft_slo_s: float
    tpot_slo_s: float
    models: dict[tuple[str, int], InstanceModel] = field(default_factory=dict)
    gpu_specs: dict[str, GpuSpec] = field(default_factory=dict)
    step_costs: dict[tuple[str, int, int, int], StepCost] = field(default_factory=dict)
    #: Step-time multipliers of every instance (1: the model's prediction): the verification's error margin runs
    #: the plan with steps this much slower than predicted (:func:`hetplan.sim.verify.error_check`).
    prefill_scale: float = 1.0
    decode_scale: float = 1.0

    def slowed(self, prefill_scale: float, decode_scale: float) -> Deployment:
        """This deployment with every prefill step ``prefill_scale`` and every decode step ``decode_scale`` times
        the model's (its own step tables; the instance models are shared)."""
        return replace(self, step_costs={}, prefill_scale=prefill_scale, decode_scale=decode_scale)

    routing: RoutingTable | None = None

    def routing_table(self) -> RoutingTable:
        """The prompt-length rule table the router follows (:mod:`hetplan.routing`): the plan's own
        (:func:`~hetplan.routing.table_from_plan`, what ``hetplan emit`` writes), else one built from the groups."""
        if self.routing is None:
            self.routing = table_from_units([g.label for g in self.groups], [g.weight_req_per_s for g in self.groups],
                                            [list(g.buckets) for g in self.groups])  # fmt: skip
        return self.routing

    def step_cost(self, gpu: str, tp: int, max_seqs: int, max_context_tokens: int) -> StepCost:
        """The (cached) :class:`StepCost` of ``gpu`` at TP ``tp``: runs on one deployment (a capacity search)
        share its tables and prefill memo."""
        key = (gpu, tp, max_seqs, max_context_tokens)
        cost = self.step_costs.get(key)
        if cost is None:
            cost = self.step_costs[key] = _shared_step_cost(
                self.model(gpu, tp), max_seqs, max_context_tokens, self.prefill_scale, self.decode_scale
            )
        return cost

    def gpu(self, name: str) -> GpuSpec:
        """The GPU entry for ``name``: the one the plan recorded (``resolved.gpus``), else the catalog's (for
        :func:`simple_deployment`, which builds from names)."""
        return self.gpu_specs.get(name) or find_gpu(name)

    def model(self, gpu: str, tp: int) -> InstanceModel:
        """The (cached) performance model of ``gpu`` at TP ``tp``."""
        key = (gpu, tp)
        if key not in self.models:
            self.models[key] = InstanceModel(self.arch, self.gpu(gpu), tp, 1, self.settings)
        return self.models[key]

    def kv_transfer_coeffs(self, group: Group) -> tuple[float, float]:
        """``(seconds, seconds per prompt token)`` of a prefill→decode KV transfer in ``group``."""
        base = float(kv_transfer_s(self.arch, 0.0, group.link_bytes_per_s, self.settings))
        per = float(kv_transfer_s(self.arch, 1.0, group.link_bytes_per_s, self.settings)) - base
        return base + group.extra_latency_s, per


def _check_plan_layout(plan: Plan) -> None:
    """The fields of combos/instances the simulator reads: strategy, TP degrees, decode batch."""
    if plan.strategy not in STRATEGIES:
        raise InputError(
            f"plan strategy {plan.strategy!r} is not one the simulator replays",
            f"known: {', '.join(STRATEGIES)}",
            "fix strategy in the plan, or re-plan",
        )
    tps = list(plan.tp_options)
    settings = plan.settings
    for ci, c in enumerate(plan.combos):
        for key, tp in (("prefill_tp", c.prefill_tp), ("decode_tp", c.decode_tp)):
            if tp not in tps:
                raise InputError(f"plan combos[{ci}].{key} = {tp!r} is not one of the TP options {tps}",
                                 fix=f"fix combos[{ci}].{key} in the plan")  # fmt: skip
        b = c.decode_batch
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= settings.max_num_seqs:
            raise InputError(
                f"plan combos[{ci}].decode_batch = {b!r} is outside 1 .. {settings.max_num_seqs}",
                "it is the decode instances' --max-num-seqs, at most perf_settings.max_num_seqs",
                f"fix combos[{ci}].decode_batch in the plan",
            )
    for ti, t in enumerate(plan.instances):
        if t.tp not in tps:
            raise InputError(f"plan instances[{ti}].tp = {t.tp!r} is not one of the TP options {tps}",
                             fix=f"fix instances[{ti}].tp in the plan")  # fmt: skip


def deployment_from_plan(plan: Plan) -> Deployment:
    """Rebuild every instance of a plan (combos or aggregated instances) from the model and GPU entries it
    records (no catalog look-up: a profiled GPU or a ``config.json`` model replays as it was planned).

    Decode instances run at most the plan's ``decode_batch`` sequences (what ``hetplan emit`` passes as
    ``--max-num-seqs``); prefill and aggregated instances use ``perf_settings.max_num_seqs``. Every instance uses
    ``perf_settings.max_num_batched_tokens``.

    Raises:
        InputError: a TP degree or decode batch out of range, or a GPU the plan has no entry for.
        WorkBudgetError: more than :data:`hetplan.budget.MAX_SIM_INSTANCES` instances.
        OutOfMemoryError: an instance whose weights do not fit.
    """
    settings = plan.settings
    _check_plan_layout(plan)
    # a hand-edited plan may ask for millions of copies: refused before any instance is built
    check_sim_start(0, sum(c.count * (c.n_prefill + c.n_decode) for c in plan.combos)
                    + sum(t.count for t in plan.instances))  # fmt: skip
    arch = ModelArch(plan.model.spec, plan.weight_dtype, plan.kv_dtype)
    instances: list[InstanceSpec] = []
    groups: list[Group] = []
    dep = Deployment(arch, settings, instances, groups, plan.aggregated, plan.slo.ttft_s, plan.slo.tpot_s)
    dep.gpu_specs.update({name: plan.gpu(name) for name in plan.used_gpu_names()})

    def add(name: str, role: str, gpu: str, tp: int, seqs: int, group: int) -> int:
        spec = dep.gpu(gpu)
        dep.model(spec.name, tp).require_fit()
        net = network_bytes_per_s(spec, tp, settings)
        instances.append(InstanceSpec(name, role, spec.name, tp, seqs, settings.max_num_batched_tokens, group, net))
        return len(instances) - 1

    for ci, c in enumerate(plan.combos):
        # one routing group per combo, all its copies together: their prefill instances share one queue and so do
        # their decode instances (work-conserving dispatch, hetplan.sim.dispatch)
        g = len(groups)
        pre = tuple(
            add(f"c{ci}.{copy}/p{i}", "prefill", c.prefill_gpu, c.prefill_tp, settings.max_num_seqs, g)
            for copy in range(c.count)
            for i in range(c.n_prefill)
        )
        dec = tuple(
            add(f"c{ci}.{copy}/d{i}", "decode", c.decode_gpu, c.decode_tp, c.decode_batch, g)
            for copy in range(c.count)
            for i in range(c.n_decode)
        )
        link = min(instances[pre[0]].network_bytes_per_s, instances[dec[0]].network_bytes_per_s)
        extra = 0.0
        wan = plan.scenario_extra.get("cross_provider")
        if c.cross_site and isinstance(wan, dict):  # its KV crosses the WAN link the plan was priced with
            link = min(link, float(wan.get("wan_gb_per_s", 0.0)) * 1e9 or link)
            extra = float(wan.get("wan_latency_s", 0.0))
        label = f"{c.label} x{c.count}" if c.count > 1 else c.label
        # a mixed plan's combo serves its request-size buckets (routed by size, as aggregated types are)
        sizes = tuple(
            (b.prompt_lo_tokens, b.prompt_hi_tokens, b.output_lo_tokens, b.output_hi_tokens, b.share) for b in c.buckets
        )
        groups.append(
            Group(label, c.goodput_req_per_s * c.count, pre, dec, sizes, link_bytes_per_s=link, extra_latency_s=extra)
        )
    for ti, t in enumerate(plan.instances):
        g = len(groups)
        idx = tuple(add(f"m{ti}/a{i}", "aggregated", t.gpu, t.tp, settings.max_num_seqs, g) for i in range(t.count))
        buckets = tuple(
            (b.prompt_lo_tokens, b.prompt_hi_tokens, b.output_lo_tokens, b.output_hi_tokens, b.share) for b in t.buckets
        )
        groups.append(Group(f"{t.count}x {t.gpu} TP{t.tp}", t.traffic_share or 1e-9, idx, idx, buckets))
    dep.routing = table_from_plan(plan)  # the one rule table the emitted routers follow too
    return dep


def simple_deployment(
    model: str = "Llama-3-8B",
    gpu: str = "H100-SXM",
    tp: int = 1,
    disaggregated: bool = False,
    count: int = 1,
    decode_gpu: str | None = None,
    decode_tp: int | None = None,
    max_num_seqs: int = 256,
    max_num_batched_tokens: int = 8192,
    settings: PerfSettings | None = None,
    ttft_slo_s: float = 2.0,
    tpot_slo_s: float = 0.1,
) -> Deployment:
    """One routing group: ``count`` aggregated instances, or ``count`` prefill → ``count`` decode instances.

    For tests, benchmarks and what-if runs without a plan file.

    Raises:
        InputError: unknown model or GPU. OutOfMemoryError: the model does not fit.
    """
    st = settings or PerfSettings()
    arch = ModelArch(find_model(model))
    dep = Deployment(arch, st, [], [], not disaggregated, ttft_slo_s, tpot_slo_s)

    def add(role: str, name: str, t: int) -> int:
        spec = find_gpu(name)
        dep.model(spec.name, t).require_fit()
        net = network_bytes_per_s(spec, t, st)
        dep.instances.append(
            InstanceSpec(
                f"{role[0]}{len(dep.instances)}", role, spec.name, t, max_num_seqs, max_num_batched_tokens, 0, net
            )  # fmt: skip
        )
        return len(dep.instances) - 1

    if disaggregated:
        pre = tuple(add("prefill", gpu, tp) for _ in range(count))
        dec = tuple(add("decode", decode_gpu or gpu, decode_tp or tp) for _ in range(count))
        link = min(dep.instances[pre[0]].network_bytes_per_s, dep.instances[dec[0]].network_bytes_per_s)
        dep.groups.append(Group("simple", 1.0, pre, dec, link_bytes_per_s=link))
    else:
        idx = tuple(add("aggregated", gpu, tp) for _ in range(count))
        dep.groups.append(Group("simple", 1.0, idx, idx))
    return dep


__all__ = [
    "Deployment",
    "Group",
    "InstanceSpec",
    "StepCost",
    "deployment_from_plan",
    "simple_deployment",
]
