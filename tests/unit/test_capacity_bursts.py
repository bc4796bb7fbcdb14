"""Burst-aware and pooled capacities (hetplan.perf.capacity, issue 20), and the examples' verdicts."""

from __future__ import annotations

import heapq
import math

import numpy as np
import pytest

from hetplan import api
from hetplan.catalog.loader import find_gpu, find_model
from hetplan.perf.arch import ModelArch
from hetplan.perf.capacity import prefill_capacity
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats
from hetplan.perf.decode_capacity import decode_capacities
from hetplan.perf.latency import InstanceModel
from hetplan.perf.queueing import erlang_c, mg1_wait_quantile_s, mgn_ttft_quantile_s
from hetplan.perf.settings import PerfSettings
from hetplan.scenario import load_scenario
from hetplan.workload.readers import read_stream
from tests.conftest import EXAMPLES
from tests.unit.capacity_reference import decode_capacity, fluid_wait_s, mgn_wait_quantile_s


def test_fluid_wait_is_lindleys_recursion():
    rng = np.random.default_rng(0)
    work, gaps = rng.exponential(1.0, 500), rng.exponential(1.1, 499)
    w, expected = 0.0, [0.0]
    for i in range(499):
        w = max(0.0, w + work[i] - gaps[i])
        expected.append(w)
    assert np.allclose(fluid_wait_s(work, gaps), expected)


def test_mgn_reduces_to_mg1_and_its_quantile_solves_the_cdf():
    rng = np.random.default_rng(1)
    own = np.sort(rng.lognormal(0.0, 1.0, 256))
    mean, second = float(own.mean()), float((own**2).mean())
    for rate in (0.2 / mean, 0.6 / mean, 0.95 / mean):
        assert mgn_wait_quantile_s(rate, 1, mean, second, 0.9) == pytest.approx(
            mg1_wait_quantile_s(rate, mean, second, 0.9)
        )
    for n, rho in ((1, 0.5), (4, 0.85), (8, 0.97)):
        rate = rho * n / mean
        x = mgn_ttft_quantile_s(rate, n, mean, second, own, 0.9)
        c = erlang_c(n, rate * mean)
        tau = mean / (n - rate * mean) * (second / mean**2) / 2
        cdf = float(np.where(x >= own, 1 - c * np.exp(-np.maximum(x - own, 0) / tau), 0).mean())
        assert cdf == pytest.approx(0.9, abs=1e-9)
    assert math.isinf(mgn_ttft_quantile_s(4.001 / mean, 4, mean, second, own, 0.9))  # saturated


@pytest.fixture(scope="module")
def h800_tp2():
    arch = ModelArch(find_model("Llama-3-70B"))
    return InstanceModel(arch, find_gpu("H800"), 2, 1, PerfSettings())


def test_pooled_prefill_capacity_grows_with_the_pool(h800_tp2):
    rng = np.random.default_rng(2)
    stats = LengthStats(rng.integers(200, 4000, 2000), rng.integers(1, 300, 2000), 0.9)
    cap = prefill_capacity(h800_tp2, stats, 1.5, 50e9, max_instances=8)
    per = np.array(cap.rate_by_n)
    assert per[0] == cap.rate_per_s and np.all(np.diff(per) > 0)  # a shared queue beats separate ones
    assert per[-1] < 1 / cap.mean_service_s  # never past full utilisation


def test_bursty_trace_lowers_prefill_capacity_and_a_poisson_one_does_not(h800_tp2):
    code = read_stream([str(EXAMPLES / "data" / "azure_code_15min.csv")])
    stats = LengthStats(code.prompt_tokens, code.output_tokens, 0.9)
    poisson = prefill_capacity(h800_tp2, stats, 1.5, 50e9, max_instances=8)
    own = code.n / code.duration_s
    bursty = prefill_capacity(
        h800_tp2, stats, 1.5, 50e9, ArrivalTrace(code.arrival_s, code.prompt_tokens, own, 4.4), max_instances=8
    )
    assert bursty.per_instance(8) < 0.4 * poisson.per_instance(8)  # inter-arrival CV 14.4
    rng = np.random.default_rng(3)
    smooth_arrivals = np.cumsum(rng.exponential(1 / own, code.n))
    smooth = prefill_capacity(
        h800_tp2, stats, 1.5, 50e9, ArrivalTrace(smooth_arrivals, code.prompt_tokens, own, 4.4), max_instances=8
    )
    assert smooth.per_instance(1) == pytest.approx(poisson.per_instance(1), rel=0.05)


def _pooled_p90_tpot_s(arrival_s: np.ndarray, output_tokens: np.ndarray, slots: int, step_s: float) -> float:
    """p90 TPOT of requests (>= 2 output tokens) served FCFS by ``slots`` pooled decode slots, each request holding
    one slot for (o - 1) x ``step_s`` and its slot wait spread over its o - 1 tokens: an exact discrete replay,
    independent of the fluid bound."""
    free = [0.0] * slots
    tpot = []
    for a, o in zip(arrival_s, output_tokens, strict=True):
        if o < 2:
            continue
        start = max(a, heapq.heappop(free))
        heapq.heappush(free, start + (o - 1) * step_s)
        tpot.append(step_s + (start - a) / (o - 1))
    return float(np.percentile(tpot, 90))


def test_bursty_trace_lowers_decode_capacity_where_the_poisson_slot_queue_over_promises(h800_tp2):
    code = read_stream([str(EXAMPLES / "data" / "azure_code_15min.csv")])
    stats = LengthStats(code.prompt_tokens, code.output_tokens, 0.9)
    own, sized, slo = code.n / code.duration_s, 4.4, 0.08
    poisson = decode_capacity(h800_tp2, stats, slo)
    trace = ArrivalTrace(code.arrival_s, code.prompt_tokens, own, sized, code.output_tokens)
    bursty = decode_capacity(h800_tp2, stats, slo, trace)
    assert (bursty.batch, bursty.step_s) == (poisson.batch, poisson.step_s)
    assert bursty.rate_per_s < 0.2 * poisson.rate_per_s  # the burst bound binds (without it they are equal)

    def p90_at(rate: float) -> float:
        # the fleet a plan sizes at this per-instance capacity, its slots pooled (the simulator's shared queues)
        n = math.ceil(sized / rate)
        return _pooled_p90_tpot_s(code.arrival_s * own / sized, code.output_tokens, n * poisson.batch, poisson.step_s)

    assert p90_at(poisson.rate_per_s) > 10 * slo  # the Poisson capacity's fleet misses the TPOT SLO by far
    assert p90_at(bursty.rate_per_s) <= slo  # the burst-aware one holds it
    # a Poisson replay of the same requests: the bound barely binds (0.82x the M/M/B capacity when measured)
    rng = np.random.default_rng(3)
    smooth = ArrivalTrace(np.cumsum(rng.exponential(1 / own, code.n)), code.prompt_tokens, own, sized,
                          code.output_tokens)  # fmt: skip
    assert decode_capacity(h800_tp2, stats, slo, smooth).rate_per_s >= 0.75 * poisson.rate_per_s


def test_decode_capacities_with_a_trace_are_bit_identical_to_one_at_a_time(h800_tp2):
    code = read_stream([str(EXAMPLES / "data" / "azure_code_15min.csv")])
    arch = ModelArch(find_model("Llama-3-70B"))
    insts = [h800_tp2, InstanceModel(arch, find_gpu("H800"), 4, 1, PerfSettings()),
             InstanceModel(arch, find_gpu("A800"), 8, 1, PerfSettings())]  # fmt: skip
    p, o = code.prompt_tokens, code.output_tokens
    samples = [LengthStats(p, o, 0.9), LengthStats(p[o > 20], o[o > 20], 0.9), LengthStats(p, o, 0.5)]
    own = code.n / code.duration_s
    pairs = [(m, st) for st in samples for m in insts]
    for outputs in (o, None):  # the trace's own outputs, or the samples' mean output per request
        trace = ArrivalTrace(code.arrival_s, p, own, 6.0, outputs)
        batch = decode_capacities(pairs, 0.08, trace)
        assert batch == [decode_capacity(m, st, 0.08, trace) for m, st in pairs]
        assert batch != decode_capacities(pairs, 0.08)  # the bound binds somewhere


@pytest.mark.slow
@pytest.mark.parametrize(
    "example",
    [
        "llama3-70b-azure-conv",
        "cauchy-h800-a800-h20",
        pytest.param(
            "llama31-8b-mooncake",
            marks=pytest.mark.xfail(
                strict=True,
                reason="since the calibrated model (issue 13) the analytic capacity of example (c) is conservative: "
                "simulated 4.95 vs analytic 2.63 req/s (1.88x for the 8x L40S TP1 -> A10G TP4 plan that "
                "verification's search below the first verified plan keeps)",
            ),
        ),
    ],
)
def test_examples_are_verified_and_the_analytic_capacity_is_within_20_percent(example):
    # re-sized as hetplan plan does: example (b)'s first plan holds in sample but misses out of sample
    plan = api.plan_verified(load_scenario(EXAMPLES / f"{example}.yaml"), analysis=False, resize=True)
    v = plan.verification
    assert v is not None and v.status == "verified", v and v.verdict
    assert [r.misses for r in v.runs] == [[]] * len(v.runs)  # at the goodput target and the trace's rate
    assert v.simulated_capacity_req_per_s is not None and v.analytic_capacity_req_per_s
    ratio = v.simulated_capacity_req_per_s / v.analytic_capacity_req_per_s
    assert 0.8 <= ratio <= 1.2, ratio
