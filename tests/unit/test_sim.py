"""Simulator, policies and metrics: hand-made traces with known answers (DESIGN §4 scheduling checks)."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from hetplan.errors import InputError
from hetplan.perf.settings import PerfSettings
from hetplan.plan.blocks import CascadeSettings as CascadeBlock
from hetplan.plan.doc import from_doc, load_plan, read_plan_doc, to_doc
from hetplan.plan.doc import parse_bucket_label as parse_bucket
from hetplan.sim.calibrate import calibrate, router_config
from hetplan.sim.deployment import deployment_from_plan, simple_deployment
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.metrics import jain_index, weighted_percentile
from hetplan.sim.policies import SCHEDULERS, CascadeSettings, get_scheduler
from hetplan.sim.run import SimRequest, find_capacity, simulation
from hetplan.sim.scheduler import FcfsScheduler, cascade_estimate_s
from hetplan.sim.step_cost import StepCost
from hetplan.sim.verify import verify
from hetplan.workload.model import ClassSlo, make_stream
from hetplan.workload.readers import read_stream
from tests.conftest import FIXTURES


def _run(dep, stream, policy, chunked=True, **cascade):
    pol = get_scheduler(policy, CascadeSettings(**cascade) if cascade else None)
    return Simulator(dep, stream, pol, SimConfig(chunked_prefill=chunked)).run()


def _order(res, rids):
    return sorted(rids, key=lambda r: res.first_token_s[r])


@pytest.fixture(scope="module")
def one_at_a_time():
    """One H100 running Llama-3-8B whose token cap admits one prompt per iteration; r0 keeps it busy while
    r1..r3 arrive (output 1 token: a request is done when its prefill is)."""
    dep = simple_deployment(max_num_batched_tokens=320)
    arrival = [0.0, 1e-4, 2e-4, 3e-4]
    prompt = [300, 300, 200, 250]
    return dep, arrival, prompt


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("fcfs", [1, 2, 3]), ("sjf", [2, 3, 1]), ("edf", [3, 2, 1])],
)
def test_policy_order_on_a_hand_made_trace(one_at_a_time, policy, expected):
    dep, arrival, prompt = one_at_a_time
    stream = make_stream(arrival, prompt, [1] * 4, ["x", "a", "b", "c"]).with_slos(
        2.0, 0.1, {"a": ClassSlo(10.0), "b": ClassSlo(5.0), "c": ClassSlo(1.0)}
    )
    res = _run(dep, stream, policy, chunked=False)
    assert np.isfinite(res.done_s).all()
    assert _order(res, [1, 2, 3]) == expected


def test_policies_resolve_through_the_scheduler_registry():
    assert list(SCHEDULERS) == ["fcfs", "sjf", "oracle-sjf-total", "edf", "cascade"]
    for name, cls in SCHEDULERS.items():
        sched = get_scheduler(f" {name.upper()} ")
        assert type(sched) is cls and sched.name == name
        # only the labelled oracle reads the true output length, and its name says so
        assert cls.oracle == name.startswith("oracle-")
    assert get_scheduler("sjf-total").name == "oracle-sjf-total"  # the former name still resolves
    assert get_scheduler("cascade", CascadeSettings(kappa=2.0, q2=0.3)).settings() == {"kappa": 2.0, "q2": 0.3}
    assert get_scheduler("fcfs", CascadeSettings(kappa=2.0)).settings() == {}


def test_a_new_policy_plugs_in_without_touching_the_engine(one_at_a_time):
    class Lifo(FcfsScheduler):
        name = "lifo"

        def key(self, sim, inst, rid):
            return -sim.arr[rid]

    dep, arrival, prompt = one_at_a_time
    stream = make_stream(arrival, prompt, [1] * 4)
    res = Simulator(dep, stream, Lifo(), SimConfig(chunked_prefill=False)).run()
    assert np.isfinite(res.done_s).all()
    assert _order(res, [1, 2, 3]) == [3, 2, 1]


def test_cascade_demotes_a_hopeless_request_that_edf_serves_first(one_at_a_time):
    dep, arrival, prompt = one_at_a_time
    # r3's TTFT SLO (1 ms) is already lost: budget < 0 puts it in Tier 2; EDF serves it first all the same
    stream = make_stream(arrival, prompt, [1] * 4, ["x", "a", "b", "c"]).with_slos(
        2.0, 0.1, {"a": ClassSlo(10.0), "b": ClassSlo(5.0), "c": ClassSlo(0.001)}
    )
    assert _order(_run(dep, stream, "edf", chunked=False), [1, 2, 3]) == [3, 2, 1]
    assert _order(_run(dep, stream, "cascade", chunked=False, q2=0.0), [1, 2, 3]) == [2, 1, 3]


def _saturating_stream(n=30):
    arrival = np.arange(2 * n) * 1e-6
    classes = ["t1"] * n + ["t2"] * n
    stream = make_stream(arrival, [1000] * (2 * n), [1] * (2 * n), classes)
    # Tier 1 never runs out of budget; Tier 2's budget is negative from the start
    return stream.with_slos(2.0, 0.1, {"t1": ClassSlo(1e6), "t2": ClassSlo(1e-6)})


@pytest.mark.parametrize("q2", [0.1, 0.25, 0.5])
def test_tier2_receives_at_least_q2_under_saturation(q2):
    dep = simple_deployment(max_num_batched_tokens=1000)
    res = _run(dep, _saturating_stream(), "cascade", q2=q2)
    sat = res.counters["saturated_tokens"]
    assert sat >= 10 * 1000  # many iterations with Tier 1 over-subscribed
    assert res.counters["tier2_tokens"] / sat >= q2
    assert np.isfinite(res.done_s).all()


def test_tier2_starves_at_q2_zero():
    dep = simple_deployment(max_num_batched_tokens=1000)
    res = _run(dep, _saturating_stream(), "cascade", q2=0.0)
    assert res.counters["saturated_tokens"] > 0 and res.counters["tier2_tokens"] == 0
    t1, t2 = res.first_token_s[:30], res.first_token_s[30:]
    assert t2.min() > t1.max()  # no Tier-2 request starts while Tier 1 has work


@pytest.fixture(scope="module")
def tight_kv():
    settings = PerfSettings(gpu_memory_utilization=0.237)
    dep = simple_deployment(settings=settings)
    cap = dep.model("H100-SXM", 1).kv_capacity_tokens
    assert 500 < cap < 20_000
    return dep, cap


def _pressure_stream(cap):
    # three sequences that fit at admission and outgrow the KV cache while decoding
    size = cap // 4
    stream = make_stream([0.0, 1e-6, 2e-6], [size] * 3, [size] * 3, ["a", "b", "c"])
    return stream.with_slos(2.0, 0.1, {"a": ClassSlo(None, 0.05), "b": ClassSlo(None, 5.0), "c": ClassSlo(None, 0.5)})


def test_cascade_preempts_the_largest_budget(tight_kv):
    dep, cap = tight_kv
    res = _run(dep, _pressure_stream(cap), "cascade")
    assert res.preempted and res.preempted[0] == 1  # class b: the loosest TPOT SLO, the largest budget
    assert np.isfinite(res.done_s).all()
    assert res.counters["restores"] + res.counters["recomputes"] >= 1


def test_fcfs_preempts_the_latest_arrival_and_recomputes(tight_kv):
    dep, cap = tight_kv
    res = _run(dep, _pressure_stream(cap), "fcfs")
    assert res.preempted[0] == 2
    assert np.isfinite(res.done_s).all()
    assert res.counters["restores"] == 0 and res.counters["recomputes"] == len(res.preempted)


def test_jain_index_bounds():
    assert jain_index([0.7, 0.7, 0.7]) == pytest.approx(1.0)
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(1 / 4)
    assert jain_index([0.0, 0.0]) is None


def test_kappa_one_with_equal_loads_gives_the_model_latency():
    """DESIGN §4: κ = 1 and equal loads give T̂ = the profile. A prefill instance whose started prompts fill the
    rest of the iteration is at its maximal load: T̂ of a 3,072-token prompt is the model's latency of one full
    8,192-token iteration plus the prompt's KV transfer."""
    from hetplan.perf.latency import kv_transfer_s
    from hetplan.sim.ttft_estimate import estimator

    dep = simple_deployment(model="Llama-3.1-8B", disaggregated=True)
    stream = make_stream([0.0, 0.0, 0.0], [3072, 6144, 8000], [2, 2, 2])
    sim = Simulator(dep, stream, get_scheduler("cascade", CascadeSettings(kappa=1.0)))
    inst = sim.insts[0]
    model = dep.model("H100-SXM", 1)
    link = dep.groups[0].link_bytes_per_s
    est = estimator(sim, inst)

    def xfer(s):
        return float(kv_transfer_s(dep.arch, s, link, dep.settings))

    sim.need[2], inst.prefilling = 8192 - 3072, [2]  # started prompts: 5,120 tokens still to prefill
    full = float(model.prefill_latency_s(8192, 1))
    assert est.t0_s(inst, np.array([3072.0]))[0] == pytest.approx(full + xfer(3072), rel=1e-9)
    # idle: the current load is the prompt alone, the maximal load a full iteration: T̂ lies between them
    inst.prefilling = []
    alone = float(model.prefill_latency_s(3072, 1))
    t_idle = est.t0_s(inst, np.array([3072.0, 6144.0]))
    assert t_idle[0] == pytest.approx((alone + full) / 2 + xfer(3072), rel=1e-9)
    assert t_idle[1] > t_idle[0]  # one number per request, not per instance
    assert cascade_estimate_s(0.3, 0.3, 1.0) == 0.3
    assert cascade_estimate_s(0.2, 0.4, 2.0) == pytest.approx(0.6)


def test_kappa_one_at_maximal_load_gives_the_mixed_iteration_of_the_profile():
    """An aggregated instance at its maximal load (max_num_seqs decodes holding the whole KV cache, started prompts
    filling the chunk): T̂ of a prompt is one full mixed iteration: a full chunk's prefill + the decode step − one
    overhead; a class's κ scales it."""
    from hetplan.sim.ttft_estimate import estimator

    dep = simple_deployment(model="Llama-3.1-8B", max_num_seqs=128)
    stream = make_stream([0.0, 0.0], [3072, 100], [2, 2], ["x", "x"])
    k2 = get_scheduler("cascade", CascadeSettings(kappa=1.0, kappa_by_class=(("x", 2.5),)))
    sim = Simulator(dep, stream, k2)
    inst = sim.insts[0]
    inst.running = dict.fromkeys(range(100, 228))
    inst.ctx_sum = float(inst.cap)
    chunk = 8192 - 128
    sim.need[1], inst.prefilling = chunk - 3072, [1]
    model = dep.model("H100-SXM", 1)
    want = float(model.prefill_latency_s(chunk, 1) + inst.cost.decode_s(128, inst.cap) - inst.cost.overhead_s)
    assert estimator(sim, inst).t0_s(inst, np.array([3072.0]))[0] == pytest.approx(want, rel=1e-9)
    assert k2.t_hat_s(sim, inst, np.array([0]), np.array([3072.0]))[0] == pytest.approx(2.5 * want, rel=1e-9)


def test_cascade_is_not_edf_a_longer_prompt_has_the_smaller_budget(one_at_a_time):
    """Equal deadlines: EDF keeps arrival order; CASCADE's per-request T̂ gives the longer prompt the smaller
    budget, so it is served first (Tier 1, least budget first)."""
    dep = simple_deployment(max_num_batched_tokens=320)
    stream = make_stream([0.0, 1e-4, 2e-4], [300, 100, 300], [1] * 3)
    stream = stream.with_slos(5.0, 0.1, {})
    assert _order(_run(dep, stream, "edf", chunked=False), [1, 2]) == [1, 2]
    assert _order(_run(dep, stream, "cascade", chunked=False, q2=0.0), [1, 2]) == [2, 1]


def test_budgets_are_recomputed_and_decode_admission_uses_the_tpot_budget():
    dep = simple_deployment(model="Llama-3.1-8B")
    stream = make_stream([0.0, 0.0], [4000, 4000], [50, 50]).with_slos(1.0, 0.1, {})
    sched = get_scheduler("cascade", CascadeSettings(kappa=1.0))
    sim = Simulator(dep, stream, sched)
    inst = sim.insts[0]
    sim.need[0] = 4000
    sched.key(sim, inst, 0)
    b0, b1 = (sched.budgets_s(sim, inst, np.array([0]), t)[0] for t in (0.0, 0.9))
    assert b0 > 0 > b1 and b0 - b1 == pytest.approx(0.9)  # the same request re-tiers as it waits
    # a sequence with its first token and its KV present: the budget is its TPOT budget, no prefill T̂
    sim.first[1], sim.gen[1], sim.need[1] = 0.2, 1, 0
    k = sched.key(sim, inst, 1)
    assert k == pytest.approx(0.2 + 0.1 * 49 - 49 * inst.step_est_s)
    assert sched.budgets_s(sim, inst, np.array([1]), 0.5)[0] == pytest.approx(k - 0.5)


def test_every_policy_can_use_the_shared_host_kv_tier(tight_kv):
    """With a host tier in the run's config FCFS offloads its victims too and restores them when the transfer is
    faster than recomputing; without one it recomputes (the default, unchanged)."""
    from hetplan.sim.hostkv import HostKvTier

    dep, cap = tight_kv
    pol = get_scheduler("fcfs")
    res = Simulator(dep, _pressure_stream(cap), pol, SimConfig(host_kv=HostKvTier(dram_gb_per_s=100.0))).run()
    assert res.counters["preemptions"] >= 1 and res.counters["restores"] == res.counters["preemptions"]
    assert res.counters["recomputes"] == 0 and np.isfinite(res.done_s).all()
    slow = Simulator(dep, _pressure_stream(cap), pol, SimConfig(host_kv=HostKvTier(0.0, 1.0, 1e-6))).run()
    assert slow.counters["restores"] == 0 and slow.counters["recomputes"] >= 1


def test_step_cost_follows_the_perf_model():
    dep = simple_deployment(model="Llama-3-70B", gpu="A100-80GB-SXM", tp=4)
    model = dep.model("A100-80GB-SXM", 4)
    cost = StepCost(model, 256, 16384)
    for b, c in [(1, 100.0), (7, 1500.0), (64, 3000.0), (256, 900.0), (200, 15000.0)]:
        want = float(model.decode_step_latency_s(b, c))
        assert cost.decode_s(b, b * c) == pytest.approx(want, rel=0.01)
    for s in (1, 300, 4096):
        assert cost.prefill_s(s, s * s, 1) == pytest.approx(float(model.prefill_latency_s(s, 1)), rel=1e-9)
    assert cost.prefill_s(4 * 512, 4 * 512 * 512, 4) == pytest.approx(float(model.prefill_latency_s(512, 4)))
    assert min(cost.decode_s(1, 1), cost.prefill_s(1, 1, 1)) >= model.overhead_s > 0


def test_sglang_prefills_in_steps_of_its_own_while_its_decodes_wait():
    """r0 decodes 40 tokens; r1's 2,000-token prompt arrives while it does. vLLM puts r1's prompt into one of r0's
    decode steps; SGLang (fitted ``prefill_mix`` 0) runs it as a prefill-only step: one more iteration, in which r0
    gets no token, priced as a prefill step (cheaper than the mixed one, so r1's first token comes sooner)."""
    out = {}
    for engine in ("vllm", "sglang"):
        dep = simple_deployment(settings=PerfSettings.for_engine(engine))
        assert dep.model("H100-SXM", 1).prefill_separate == (engine == "sglang")
        stream = make_stream([0.0, 0.05], [100, 2000], [40, 1], ["x", "x"])
        out[engine] = _run(dep, stream, "fcfs")
    vllm, sglang = out["vllm"], out["sglang"]
    assert np.isfinite(sglang.done_s).all() and np.isfinite(vllm.done_s).all()
    assert sglang.counters["iterations"] == vllm.counters["iterations"] + 1
    cost = StepCost(simple_deployment(settings=PerfSettings.for_engine("sglang")).model("H100-SXM", 1), 256, 16384)
    assert cost.separate_prefill
    ttft = {e: float(r.first_token_s[1] - 0.05) for e, r in out.items()}
    # r1 waits at most for r0's step in flight, then its own prefill step
    assert ttft["sglang"] <= cost.decode_s(1, 200) + cost.prefill_s(2000, 2000 * 2000, 1) + 1e-9


def test_weighted_percentile_equals_numpy_on_the_repeat():
    rng = np.random.default_rng(1)
    v, w = rng.random(50), rng.integers(0, 9, 50)
    for q in (0, 10, 50, 90, 99, 100):
        assert weighted_percentile(v, w, q) == pytest.approx(np.percentile(np.repeat(v, w), q))


@pytest.fixture(scope="module")
def plan_a():
    return load_plan(FIXTURES / "plan_two_combos.json")


def raw_plan_a():
    """The example (a) plan as a document, to edit by hand."""
    return read_plan_doc(FIXTURES / "plan_two_combos.json")


@pytest.fixture(scope="module")
def conv():
    return read_stream([FIXTURES / "azure_conv_200.csv"])


def test_plan_instances_are_rebuilt(plan_a):
    dep = deployment_from_plan(plan_a)
    roles = [(i.role, i.gpu, i.tp, i.max_num_seqs) for i in dep.instances]
    assert roles == [
        ("prefill", "A100-80GB-SXM", 2, 256),
        ("decode", "A10G", 8, 35),
        ("prefill", "H100-SXM", 2, 256),
        ("decode", "A100-80GB-SXM", 4, 256),
    ]
    assert [g.weight_req_per_s for g in dep.groups] == [1.03017, 5.18974]


def test_melange_plan_routes_by_bucket(conv):
    plan = load_plan(FIXTURES / "plan_example_a_melange.json")
    dep = deployment_from_plan(plan)
    # example (a)'s Mélange plan runs one aggregated instance per planned replica (two before issue 13's calibrated
    # model, one with it): every instance is aggregated and none is missing
    assert dep.aggregated and dep.instances and {i.role for i in dep.instances} == {"aggregated"}
    assert len(dep.instances) == sum(u.count for u in plan.instances)
    m = simulation(SimRequest(plan, conv)).to_doc()
    assert m["finished"] == 200 and m["attainment"]["joint"] > 0.5
    assert parse_bucket("in 8192+, out 0-64") == (8192.0, float("inf"), 0.0, 64.0)


def test_same_seed_same_result_and_seed_matters(plan_a, conv):
    cfg = SimConfig(router="random", seed=7)
    a = simulation(SimRequest(plan_a, conv, policy="cascade", rate_scale=3.0, config=cfg)).to_doc()
    b = simulation(SimRequest(plan_a, conv, policy="cascade", rate_scale=3.0, config=cfg)).to_doc()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    c = simulation(
        SimRequest(plan_a, conv, policy="cascade", rate_scale=3.0, config=SimConfig(router="random", seed=8))
    ).to_doc()
    assert c["utilization"] != a["utilization"]


def test_metrics_invariants(plan_a, conv):
    m = simulation(SimRequest(plan_a, conv, rate_scale=2.0)).to_doc()
    assert m["requests"] == 200 and m["finished"] + m["dropped"] <= 200
    att = m["attainment"]
    assert att["joint"] <= min(att["ttft"], att["tpot"])
    assert m["goodput_req_per_s"] == pytest.approx(att["joint"] * 200 / m["serving_span_s"], rel=1e-4)
    assert m["serving_span_s"] >= m["duration_s"] and m["unfinished"] == 0 and m["warnings"] == []
    assert m["ttft_s"]["p50"] <= m["ttft_s"]["p90"] <= m["ttft_s"]["p99"]
    assert sum(w["requests"] for w in m["time_series"]) == 200
    assert all(0 <= u <= 1 for u in m["utilization"]["by_instance"].values())
    assert m["counters"]["events"] >= m["counters"]["iterations"] > 0


def test_overload_lowers_attainment(plan_a, conv):
    low = simulation(SimRequest(plan_a, conv, rate_scale=0.5)).to_doc()
    high = simulation(SimRequest(plan_a, conv, rate_scale=8.0)).to_doc()
    assert low["attainment"]["joint"] > high["attainment"]["joint"]


def test_find_capacity_brackets_the_target(plan_a, conv):
    cap = find_capacity(SimRequest(plan_a, conv), target=0.9, steps=4)
    assert cap["rate_scale"] is not None
    assert cap["metrics"]["attainment"]["joint"] >= 0.9
    failing = [r for r in cap["runs"] if r["rate_scale"] == cap["failing_rate_scale"]]
    assert failing[0]["attainment"] < 0.9
    # both scales are rounded to 6 significant digits (hetplan.units.rnd): their ratio carries up to ~1e-5 of it
    assert 1 < cap["failing_rate_scale"] / cap["rate_scale"] <= 2 ** (1 / 2**4) + 2e-5


def test_calibrate_covers_the_quantile(plan_a, conv):
    block = calibrate(SimRequest(plan_a, conv, rate_scale=2.0), quantile=0.9)
    assert block["kappa"] > 0 and block["coverage"] >= 0.9
    assert block["q2"] in [r["q2"] for r in block["q2_sweep"]]
    cfg = router_config(plan_a, block)
    assert cfg["kappa"] == block["kappa"] and len(cfg["groups"]) == 2
    plan = replace(plan_a, cascade=CascadeBlock.from_doc(block))
    m = simulation(SimRequest(plan, conv, policy="cascade")).to_doc()
    assert m["cascade"] == {"kappa": block["kappa"], "q2": block["q2"]}
    assert set(block["kappa_by_class"]) == {"azure_conv_200"} and block["q2_sweep"][0]["objective"] >= 0


def test_verify_flags_misses_under_overload(plan_a, conv):
    ok = verify(plan_a, conv.scaled(0.5))
    assert ok["misses"] == []
    bad = verify(plan_a, conv.scaled(10.0))
    assert any("TTFT" in text for text in bad["misses"])


def test_bad_inputs_raise_input_errors(plan_a, conv):
    with pytest.raises(InputError, match="unknown policy"):
        get_scheduler("lifo")
    with pytest.raises(InputError, match="rate-scale"):
        conv.scaled(0.0)
    with pytest.raises(InputError, match="q2"):
        CascadeSettings(q2=1.5)
    with pytest.raises(InputError, match="router"):
        SimConfig(router="hash")
    with pytest.raises(InputError, match="unknown request classes"):
        conv.with_slos(1.0, 0.1, {"nope": ClassSlo(1.0)})
    with pytest.raises(InputError):
        deployment_from_plan(from_doc({"kind": "plan"}))


def test_one_request_on_an_idle_disaggregated_pair_is_hand_checkable():
    from hetplan.perf.latency import kv_transfer_s

    dep = simple_deployment(model="Llama-3-70B", gpu="H100-SXM", tp=2, disaggregated=True, decode_gpu="A100-80GB-SXM",
                            decode_tp=4)  # fmt: skip
    res = _run(dep, make_stream([0.0], [1000], [11]), "fcfs")
    pre, dec = dep.model("H100-SXM", 2), dep.model("A100-80GB-SXM", 4)
    link = dep.groups[0].link_bytes_per_s
    ttft = float(pre.prefill_latency_s(1000, 1) + kv_transfer_s(dep.arch, 1000, link, dep.settings))
    assert res.first_token_s[0] == pytest.approx(ttft, rel=1e-9)
    steps = [float(dec.decode_step_latency_s(1, 1000 + k)) for k in range(1, 11)]
    assert res.done_s[0] - res.first_token_s[0] == pytest.approx(sum(steps), rel=0.01)


def test_cascade_restores_kv_when_the_tier_is_fast_and_recomputes_when_it_is_not(tight_kv):
    dep, cap = tight_kv
    fast = _run(dep, _pressure_stream(cap), "cascade", dram_gb_per_s=1000.0)
    assert fast.counters["restores"] >= 1 and fast.counters["recomputes"] == 0
    slow = _run(dep, _pressure_stream(cap), "cascade", dram_gib=0.0, ssd_gb_per_s=1e-6)
    assert slow.counters["restores"] == 0 and slow.counters["recomputes"] >= 1
    assert np.isfinite(slow.done_s).all() and np.isfinite(fast.done_s).all()


@pytest.mark.parametrize("router", ["round-robin", "jsq", "random"])
def test_every_router_uses_every_combo(plan_a, conv, router):
    m = simulation(SimRequest(plan_a, conv, rate_scale=2.0, config=SimConfig(router=router, seed=1))).to_doc()
    busy = m["utilization"]["by_instance"]
    assert all(u > 0 for u in busy.values()), busy
    assert m["finished"] == 200


def test_without_chunked_prefill_a_prompt_longer_than_the_token_cap_runs_alone():
    dep = simple_deployment(max_num_batched_tokens=512)
    res = _run(dep, make_stream([0.0, 0.0], [2000, 100], [1, 1]), "fcfs", chunked=False)
    model = dep.model("H100-SXM", 1)
    assert res.first_token_s[0] == pytest.approx(float(model.prefill_latency_s(2000, 1)), rel=1e-9)
    assert res.first_token_s[1] > res.first_token_s[0]


# -- review findings: goodput span, unfinished, over-context, validation, windows, classes, calibration -------------


def test_goodput_is_over_the_serving_span_not_the_arrival_span(plan_a, conv):
    m = simulation(SimRequest(plan_a, conv, rate_scale=100.0)).to_doc()
    good = round(m["attainment"]["joint"] * m["requests"])
    assert m["serving_span_s"] > 10 * m["duration_s"]  # overload: serving takes far longer than arriving
    assert m["goodput_req_per_s"] == pytest.approx(good / m["serving_span_s"], rel=1e-3)
    cap = find_capacity(SimRequest(plan_a, conv), target=0.9, steps=2)
    assert m["goodput_req_per_s"] < 2 * cap["goodput_capacity_req_per_s"]  # not ~8x as the arrival span gave
    assert "last completion" in m["goodput_definition"]


def test_goodput_of_one_request_is_finite():
    dep_plan = load_plan(FIXTURES / "plan_two_combos.json")
    m = simulation(SimRequest(dep_plan, make_stream([0.0], [500], [20]))).to_doc()
    assert m["serving_span_s"] > 0 and 0 < m["goodput_req_per_s"] < 10
    assert m["arrival_rate_per_s"] is None and m["duration_s"] == 0


def test_requests_left_at_the_drain_cut_off_are_reported(plan_a, conv):
    m = simulation(SimRequest(plan_a, conv, rate_scale=50.0, config=SimConfig(drain_s=5.0))).to_doc()
    assert m["cut_off_reached"] and m["unfinished"] > 0 and m["drain_s"] == 5.0
    assert m["finished"] + m["unfinished"] + m["dropped"] + m["dropped_over_context"] == m["requests"]
    assert any("drain cut-off" in w for w in m["warnings"])


def test_prompts_over_the_context_window_are_dropped_apart_from_kv_drops():
    dep = simple_deployment(model="Llama-3-8B")
    limit = dep.arch.spec.max_position_embeddings
    res = _run(dep, make_stream([0.0, 0.1], [limit + 1, 100], [5, 5]), "fcfs")
    assert res.over_context.tolist() == [True, False] and res.dropped.tolist() == [True, False]
    assert np.isnan(res.first_token_s[0]) or not np.isfinite(res.first_token_s[0])
    assert np.isfinite(res.done_s[1])


@pytest.mark.parametrize(
    ("block", "field"),
    [
        ([1, 2], "cascade"),
        ("yes", "cascade"),
        ({"classes": [1]}, "cascade.classes"),
        ({"classes": {"x": "fast"}}, "cascade.classes.x"),
        ({"classes": {"azure_conv_200": {"ttft_slo_s": "abc"}}}, "cascade.classes.azure_conv_200.ttft_slo_s"),
        ({"classes": {"azure_conv_200": {"ttft_slo_s": float("nan")}}}, "cascade.classes.azure_conv_200.ttft_slo_s"),
        ({"classes": {"azure_conv_200": {"ttft_slo_s": -1}}}, "cascade.classes.azure_conv_200.ttft_slo_s"),
        ({"classes": {"azure_conv_200": {"ttft_slo_s": 0}}}, "cascade.classes.azure_conv_200.ttft_slo_s"),
        ({"kappa": "big"}, "cascade.kappa"),
    ],
)
def test_malformed_cascade_block_is_refused_naming_the_field_when_the_plan_is_read(plan_a, block, field):
    """The typed cascade block is checked when the plan file is read (simulate, emit and report alike), and the
    error names the field."""
    doc = {**to_doc(plan_a), "cascade": block}
    with pytest.raises(InputError, match="plan's " + re.escape(field) + r"\b"):
        from_doc(doc)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("perf_settings", "max_num_seqs"), 0, "perf_settings.max_num_seqs"),
        (("perf_settings", "max_num_batched_tokens"), 0, "perf_settings.max_num_batched_tokens"),
        (("perf_settings", "default", "prefill_mfu"), 0, "perf_settings.default.prefill_mfu"),
        (("perf_settings", "network_efficiency"), -1, "perf_settings.network_efficiency"),
        (("combos", 0, "decode_batch"), 0, "combos[0].decode_batch"),
        (("combos", 0, "decode_batch"), 100000, "combos[0].decode_batch"),
        (("combos", 0, "prefill_tp"), 64, "combos[0].prefill_tp"),
        (("strategy",), "bogus", "strategy"),
    ],
)
def test_out_of_range_engine_settings_are_refused(path, value, field):
    plan = raw_plan_a()
    node = plan if path[0] in ("combos", "strategy") else plan["scenario"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(InputError, match=re.escape(field)):
        deployment_from_plan(from_doc(plan))


def test_time_series_is_capped_and_a_tiny_rate_scale_is_cheap(plan_a, conv):
    m = simulation(SimRequest(plan_a, conv, rate_scale=1e-8)).to_doc()  # arrivals 3e9 s apart: idle time costs nothing
    assert m["finished"] == 200 and len(m["time_series"]) <= 200 and m["window_s"] >= m["duration_s"] / 10_000
    assert any("windows" in w for w in m["warnings"])
    small = simulation(SimRequest(plan_a, conv, window_s=1e-3)).to_doc()
    assert small["window_s"] > 1e-3 and any("windows" in w for w in small["warnings"])


def test_a_partial_window_is_divided_by_its_covered_part(plan_a, conv):
    m = simulation(
        SimRequest(plan_a, conv, rate_scale=2.0, window_s=600.0)
    ).to_doc()  # one window, longer than the trace
    (w,) = m["time_series"]
    assert w["width_s"] == pytest.approx(m["duration_s"], rel=1e-6)
    assert w["arrival_rate_per_s"] == pytest.approx(m["arrival_rate_per_s"], rel=1e-3)


def _azure(path, start, rows):
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    lines += [f"2023-11-16 18:{start + i:02d}:00.0000000,{100 + i},{10 + i}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_mixed_azure_traces_keep_their_real_offsets_and_order_does_not_matter(tmp_path):
    a = _azure(tmp_path / "conv.csv", 0, 3)
    b = _azure(tmp_path / "code.csv", 2, 3)  # starts 120 s after conv, tied with conv's third request
    ab, ba = read_stream([a, b]), read_stream([b, a])
    assert ab.arrival_s.tolist() == [0, 60, 120, 120, 180, 240]
    for name in ("arrival_s", "prompt_tokens", "output_tokens", "class_id"):
        assert getattr(ab, name).tolist() == getattr(ba, name).tolist()
    assert ab.source == ba.source


def test_trace_class_rules(tmp_path):
    a = _azure(tmp_path / "x.csv", 0, 3)
    (tmp_path / "other").mkdir()
    b = _azure(tmp_path / "other" / "x.csv", 0, 3)
    with pytest.raises(InputError, match="same name"):
        read_stream([a, b])
    with pytest.raises(InputError, match="given twice"):
        read_stream([a, a])
    c = tmp_path / "cls.csv"
    c.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens,kind\n2023-11-16 18:00:00,10,5,chat\n2023-11-16 18:00:01,10,5,\n"
    )
    with pytest.raises(InputError, match="empty in data row 2"):
        read_stream([c], class_column="kind")
    with pytest.raises(InputError, match="CSV"):
        read_stream([FIXTURES / "mooncake_300.jsonl"], class_column="kind")
    with pytest.raises(InputError, match="is a directory"):
        read_stream([tmp_path])
    as_json = tmp_path / "moon.json"
    as_json.write_text((FIXTURES / "mooncake_300.jsonl").read_text())
    assert read_stream([as_json]).n == 300


def test_calibrate_warns_when_kappa_rests_on_few_requests(plan_a, conv):
    block = calibrate(SimRequest(plan_a, conv.head(5)))
    assert any("only 5 requests" in w for w in block["warnings"])


def test_kv_restore_and_recompute_both_happen_on_a_real_trace(conv):
    """Budget-aware restore is live: under KV pressure from real requests a fast host tier restores and a
    hopelessly slow one recomputes."""
    dep = simple_deployment(settings=PerfSettings(gpu_memory_utilization=0.3))
    stream = conv.scaled(4.0)
    fast = _run(dep, stream, "cascade")
    assert fast.counters["preemptions"] > 0 and fast.counters["restores"] == fast.counters["preemptions"]
    slow = _run(dep, stream, "cascade", dram_gib=0.0, ssd_gb_per_s=1e-6)
    assert slow.counters["restores"] == 0 and slow.counters["recomputes"] >= 1
