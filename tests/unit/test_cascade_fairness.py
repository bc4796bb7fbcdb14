"""CASCADE against SJF, EDF and FCFS in a constructed overload with a short chat class and a long-context class
(DESIGN §4: under overload the budget policy beats FCFS on goodput; issue 18: SJF starves the long class).

One H100 runs Llama-3.1-8B (128k context) with 2,048-token chunked prefill; 600 Poisson arrivals at 24 req/s,
85 % chat (prompts 200–1,200 tokens, TTFT SLO 1 s) and 15 % long-context (prompts 12k–20k tokens, TTFT SLO 6 s),
TPOT SLO 100 ms for both: an overload (FCFS meets 8 % of the SLOs). The figures asserted are the simulator's
(seeded, deterministic); the floors are stated in docs/cascade.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from hetplan.sim.deployment import simple_deployment
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.metrics import measure
from hetplan.sim.policies import CascadeSettings, get_scheduler
from hetplan.workload.model import ClassSlo, RequestStream, make_stream

CASCADE_FLOOR = 0.40
"""Each class's joint attainment under CASCADE in this overload stays above this (docs/cascade.md)."""


def _mixed_stream(rate: float, n: int = 600, seed: int = 0) -> RequestStream:
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(rng.exponential(1 / rate, n))
    long = rng.random(n) < 0.15
    prompt = np.where(long, rng.integers(12000, 20000, n), rng.integers(200, 1200, n))
    out = np.where(long, 32, rng.integers(32, 128, n))
    stream = make_stream(arrival, prompt, out, np.where(long, "long", "chat").tolist())
    return stream.with_slos(2.0, 0.1, {"chat": ClassSlo(1.0, 0.1), "long": ClassSlo(6.0, 0.1)})


@pytest.fixture(scope="module")
def overload() -> dict[str, dict]:
    dep = simple_deployment(model="Llama-3.1-8B", max_num_batched_tokens=2048)
    stream = _mixed_stream(24.0)
    out = {}
    for name, policy, cfg in (("fcfs", "fcfs", None), ("sjf", "sjf", None), ("edf", "edf", None),
                              ("cascade", "cascade", CascadeSettings(q2=0.1))):  # fmt: skip
        res = Simulator(dep, stream, get_scheduler(policy, cfg), SimConfig()).run()
        out[name] = measure(stream, res).to_doc()
    return out


def _by_class(m: dict) -> dict[str, float]:
    return {c["class"]: float(c["attainment"]) for c in m["classes"]}


def test_sjf_starves_the_long_context_class(overload):
    sjf = _by_class(overload["sjf"])
    assert sjf["long"] < 0.5 and sjf["chat"] > 0.9


def test_cascade_keeps_both_classes_above_the_floor_and_is_fairer_than_sjf(overload):
    cas = _by_class(overload["cascade"])
    assert min(cas.values()) > CASCADE_FLOOR
    assert cas["long"] > _by_class(overload["sjf"])["long"]
    assert overload["cascade"]["jain_index"] > overload["sjf"]["jain_index"] + 0.1


def test_under_overload_cascade_beats_fcfs_and_edf_on_goodput(overload):
    cas = overload["cascade"]["goodput_req_per_s"]
    assert cas > 2 * overload["fcfs"]["goodput_req_per_s"]
    assert cas > overload["edf"]["goodput_req_per_s"]


def test_sjf_still_wins_goodput_in_requests_here(overload):
    """What does not reproduce (docs/cascade.md): in requests per second SJF is ahead of CASCADE in this overload,
    by serving the short class and dropping the long one."""
    assert overload["sjf"]["goodput_req_per_s"] > overload["cascade"]["goodput_req_per_s"]


def test_the_tier2_reserve_uses_the_q2_of_the_class_first_in_line():
    # issue 32: q2 per class. Every class at q2 = 0.3 through q2_by_class is the run with q2 = 0.3; only the long
    # class at 0.3 differs from both (the reserve follows the class of the Tier-2 request first in line)
    dep = simple_deployment(model="Llama-3.1-8B", max_num_batched_tokens=2048)
    stream = _mixed_stream(24.0, n=300)

    def run(settings: CascadeSettings) -> dict:
        res = Simulator(dep, stream, get_scheduler("cascade", settings), SimConfig()).run()
        return {"done": res.done_s.tolist(), "tier2": res.counters["tier2_tokens"]}

    zero, all_03 = run(CascadeSettings(q2=0.0)), run(CascadeSettings(q2=0.3))
    assert zero != all_03  # premise: q2 matters in this overload
    assert run(CascadeSettings(q2=0.0, q2_by_class=(("chat", 0.3), ("long", 0.3)))) == all_03
    assert run(CascadeSettings(q2=0.3, q2_by_class=(("chat", 0.0), ("long", 0.0)))) == zero
    long_only = run(CascadeSettings(q2=0.0, q2_by_class=(("long", 0.3),)))
    assert long_only not in (zero, all_03)


def test_q2_by_class_is_validated():
    from hetplan.errors import InputError

    with pytest.raises(InputError, match="q2 of class 'chat' must be in"):
        CascadeSettings(q2_by_class=(("chat", 1.5),))


def test_choose_q2_by_class_keeps_a_combination_only_when_it_beats_the_single_q2():
    from hetplan.sim.cascade import choose_q2_by_class

    base = CascadeSettings(q2=0.1)
    # a made-up objective: class a is best at 0.3, class b at 0.0 (its value at 0.1 is what the base run scored)
    best = {"a": 0.3, "b": 0.0}

    def objective(st: CascadeSettings) -> float:
        per = dict(st.q2_by_class)
        return sum(1.0 - abs(per.get(c, st.q2) - q) for c, q in best.items())

    calls: list[CascadeSettings] = []

    def counted(st: CascadeSettings) -> float:
        calls.append(st)
        return objective(st)

    got = choose_q2_by_class(base, ["a", "b"], (0.0, 0.1, 0.3), counted, objective(base))
    assert got == (("a", 0.3), ("b", 0.0))
    assert len(calls) == 2 * 2 + 1
    assert choose_q2_by_class(base, ["a"], (0.0, 0.1, 0.3), counted, objective(base)) == ()
    # a combination worse than the single q2 is dropped
    assert choose_q2_by_class(base, ["a", "b"], (0.0, 0.1, 0.3), lambda st: 0.0 if st.q2_by_class else 1.0, 1.0) == ()
