"""Simulated instances rebuilt from a plan document, with step times from hetplan's performance model.

A plan file names, for each combo, the prefill and decode GPU, TP and counts and the decode batch; a Mélange plan
names aggregated instance types and the request-size buckets each serves. :func:`deployment_from_plan` rebuilds
the :class:`~hetplan.perf.latency.InstanceModel` of every instance from the plan's model, dtypes and
``perf_settings`` (the same objects the planner used), so the simulator and the planner share one roofline.

Step times come from the simulator's step model, :mod:`hetplan.sim.step_cost` (derived from the performance model,
never re-implemented), one per instance type and shared across deployments.

Source: instance reconstruction is hetplan's own; the split into entities (instances), events and schedulers
follows Vidur (Agrawal et al., MLSys 2024).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hetplan.budget import check_sim_start
from hetplan.catalog.context import Catalog
from hetplan.catalog.schemas import GpuSpec
from hetplan.errors import InputError
from hetplan.perf.arch import ModelArch
from hetplan.perf.latency import InstanceModel, kv_transfer_s, network_bytes_per_s
from hetplan.perf.settings import PerfSettings
from hetplan.plan.types import STRATEGIES, Plan
from hetplan.routing import RoutingTable, table_from_plan, table_from_units
from hetplan.sim.step_cost import StepCost, shared_step_cost


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
    """Instances and routing groups of a plan, with the shared model and settings; ``catalog``: whose fitted engine
    curves the instance models use and where a GPU the plan has no entry for is looked up (None: the shipped
    catalogs)."""

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
    catalog: Catalog | None = None

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
            cost = self.step_costs[key] = shared_step_cost(
                self.model(gpu, tp), max_seqs, max_context_tokens, self.prefill_scale, self.decode_scale
            )
        return cost

    def gpu(self, name: str) -> GpuSpec:
        """The GPU entry for ``name``: the one the plan recorded (``resolved.gpus``), else the catalog's (for
        :func:`simple_deployment`, which builds from names)."""
        return self.gpu_specs.get(name) or (self.catalog or Catalog.shipped()).find_gpu(name)

    def model(self, gpu: str, tp: int) -> InstanceModel:
        """The (cached) performance model of ``gpu`` at TP ``tp``."""
        key = (gpu, tp)
        if key not in self.models:
            self.models[key] = InstanceModel(self.arch, self.gpu(gpu), tp, 1, self.settings, self.catalog)
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


def deployment_from_plan(plan: Plan, catalog: Catalog | None = None) -> Deployment:
    """Rebuild every instance of a plan (combos or aggregated instances) from the model and GPU entries it
    records (no catalog look-up: a profiled GPU or a ``config.json`` model replays as it was planned), their
    step times from ``catalog``'s fitted engine curves (None: the shipped catalogs).

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
    dep = Deployment(arch, settings, instances, groups, plan.aggregated, plan.slo.ttft_s, plan.slo.tpot_s,
                     catalog=catalog)  # fmt: skip
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
        wan = plan.cross_provider
        if c.cross_site and wan is not None:  # its KV crosses the WAN link the plan was priced with
            link = min(link, float(wan.wan_gb_per_s) * 1e9 or link)
            extra = float(wan.wan_latency_s)
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
    catalog: Catalog | None = None,
) -> Deployment:
    """One routing group: ``count`` aggregated instances, or ``count`` prefill → ``count`` decode instances, the
    model and GPUs looked up in ``catalog`` (None: the shipped catalogs).

    For tests, benchmarks and what-if runs without a plan file.

    Raises:
        InputError: unknown model or GPU. OutOfMemoryError: the model does not fit.
    """
    st = settings or PerfSettings()
    cat = catalog or Catalog.shipped()
    arch = ModelArch(cat.find_model(model))
    dep = Deployment(arch, st, [], [], not disaggregated, ttft_slo_s, tpot_slo_s, catalog=cat)

    def add(role: str, name: str, t: int) -> int:
        spec = cat.find_gpu(name)
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
    "deployment_from_plan",
    "simple_deployment",
]
