"""The batched capacity searches (planner speed, issue 15) give the one-at-a-time functions' answers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hetplan.catalog.loader import find_gpu, find_model
from hetplan.perf.arch import ModelArch
from hetplan.perf.batch_search import BISECT_STEPS, largest_batch
from hetplan.perf.capacity import CAPACITY_BISECT_STEPS, fluid_prefill_rates, prefill_capacities
from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats
from hetplan.perf.latency import InstanceModel, kv_transfer_s
from hetplan.perf.queueing import erlang_c, mgn_ttft_quantile_s
from hetplan.perf.queueing_batch import QUANTILE_POINTS, erlang_c_batch, fluid_wait_batch_s, mgn_ttft_quantile_s_batch
from hetplan.solvers.melange import make_buckets
from hetplan.solvers.melange_capacity import aggregated_capacities, aggregated_capacity
from tests.unit.capacity_reference import fluid_prefill_rate, fluid_wait_s, largest


def test_erlang_c_and_fluid_wait_batches_are_bit_identical():
    rng = np.random.default_rng(3)
    servers = rng.integers(1, 9, 500)
    load = rng.uniform(0, 1.2, 500) * servers
    assert erlang_c_batch(servers, load).tolist() == [
        erlang_c(int(n), float(a)) for n, a in zip(servers, load, strict=True)
    ]
    work, gaps = rng.exponential(1.0, (7, 300)), rng.exponential(1.1, 299)
    batch = fluid_wait_batch_s(work, gaps)
    assert all(np.array_equal(batch[r], fluid_wait_s(work[r], gaps)) for r in range(7))


def test_mgn_quantile_batch_is_bit_identical():
    rng = np.random.default_rng(4)
    rows = 400
    own = np.sort(rng.lognormal(-1.0, 1.0, (rows, QUANTILE_POINTS)), axis=1)
    mean = own.mean(axis=1)
    second = (own**2).mean(axis=1)
    servers = rng.integers(1, 9, rows)
    rate = rng.uniform(0.0, 1.05, rows) * servers / mean  # some saturated (inf), some idle-ish
    batch = mgn_ttft_quantile_s_batch(rate, servers, mean, second, own, 0.9)
    one = [mgn_ttft_quantile_s(float(r), int(n), float(m), float(s), o, 0.9)
           for r, n, m, s, o in zip(rate, servers, mean, second, own, strict=True)]  # fmt: skip
    assert batch.tolist() == one
    assert any(math.isinf(x) for x in one) and any(math.isfinite(x) for x in one)


def test_largest_batch_replays_the_bisection():
    # a monotone metric: the batched search lands on the bisection's own final point, bit for bit
    rng = np.random.default_rng(5)
    roots = rng.uniform(0.01, 0.99, 50)
    powers = rng.uniform(0.5, 3.0, 50)

    def metric(x: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.where(x < 1.0, (x / (1.0 - np.minimum(x, 0.999999))) ** powers[rows], np.inf)

    limits = (roots / (1 - roots)) ** powers
    for steps in (CAPACITY_BISECT_STEPS, BISECT_STEPS):
        for r in range(50):
            got = largest_batch(lambda x, rows, r=r: metric(x, np.full(x.size, r)), float(limits[r]),
                                 np.ones(1), steps, 1)[0]  # fmt: skip
            want = largest(lambda x, r=r: bool(metric(np.array([x]), np.array([r]))[0] <= limits[r]), 1.0, steps)
            assert got == want


@pytest.fixture(scope="module")
def setup():
    arch = ModelArch(find_model("Llama-3-70B"))
    rng = np.random.default_rng(6)
    prompts = rng.lognormal(7.0, 0.8, 600).astype(int) + 1
    outputs = rng.lognormal(5.0, 0.7, 600).astype(int) + 1
    stats = LengthStats(prompts, outputs, 0.9)
    gaps = rng.exponential(0.2, 599) * np.where(rng.random(599) < 0.1, 10.0, 1.0)  # bursty
    arrivals = np.concatenate(([0.0], np.cumsum(gaps)))
    trace = ArrivalTrace(arrivals, prompts, 600 / float(arrivals[-1]), 8.0)
    insts = [InstanceModel(arch, find_gpu(g), tp) for g, tp in (("H100", 2), ("H100", 4), ("A100-80GB", 4))]
    return arch, stats, trace, insts


def _reference_prefill(inst, stats, slo, link, trace, pools):
    """The one-at-a-time computation prefill_capacity made before batching (issue 20's code)."""
    service = np.asarray(inst.prefill_latency_s(stats.prompt_tokens), dtype=float)
    kv = np.asarray(kv_transfer_s(inst.arch, stats.prompt_tokens, link, inst.settings), dtype=float)
    mean_s, second_s2 = float(service.mean()), float((service**2).mean())
    if float(np.percentile(service + kv, 90)) > slo:
        return (0.0,) * pools
    t_all = np.asarray(inst.prefill_latency_s(trace.prompt_tokens), dtype=float)
    extra = np.asarray(kv_transfer_s(inst.arch, trace.prompt_tokens, link, inst.settings), dtype=float)
    fluid = fluid_prefill_rate(t_all, extra, trace, slo, 0.9)
    own = np.sort(np.percentile(service + kv, np.linspace(0.0, 100.0, QUANTILE_POINTS)))
    out = []
    for n in range(1, pools + 1):

        def ok(rate: float, n: int = n) -> bool:
            return mgn_ttft_quantile_s(rate * n, n, mean_s, second_s2, own, 0.9) <= slo

        out.append(min(largest(ok, 1.0 / mean_s, CAPACITY_BISECT_STEPS), fluid))
    return tuple(out)


def test_prefill_capacities_match_the_one_at_a_time_search(setup):
    _, stats, trace, insts = setup
    items = [(inst, link) for inst in insts for link in (12.5e9, 50e9, 100e9)]
    for slo in (0.6, 1.5, 4.0):
        got = prefill_capacities(items, stats, slo, trace, 8)
        for (inst, link), cap in zip(items, got, strict=True):
            want = _reference_prefill(inst, stats, slo, link, trace, 8)
            # equal to the last bit for a monotone TTFT; the fluid quantile is monotone only up to rounding, so
            # the bracket may land one float away
            assert cap.rate_by_n == pytest.approx(want, rel=1e-12, abs=0)
            assert cap.rate_per_s == cap.rate_by_n[0]


def test_fluid_rates_batch_matches_scalar(setup):
    _, _, trace, insts = setup
    works = [np.asarray(i.prefill_latency_s(trace.prompt_tokens), dtype=float) for i in insts]
    extras = [np.zeros_like(w) for w in works]
    got = fluid_prefill_rates(works, extras, trace, 1.5, 0.9)
    want = [fluid_prefill_rate(w, e, trace, 1.5, 0.9) for w, e in zip(works, extras, strict=True)]
    assert got.tolist() == pytest.approx(want, rel=1e-12, abs=0)


def test_aggregated_capacities_are_bit_identical(setup):
    _, stats, _, insts = setup
    buckets = make_buckets(stats)
    for inst in insts:
        for ttft, tpot in ((2.0, 0.1), (0.5, 0.05), (5.0, 0.03)):
            got = aggregated_capacities(inst, [b.stats for b in buckets], ttft, tpot)
            assert got == [aggregated_capacity(inst, b.stats, ttft, tpot) for b in buckets]
