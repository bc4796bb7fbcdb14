import math

import numpy as np
import pytest

from hetplan.perf.capacity_inputs import LengthStats
from hetplan.solvers.melange import Bucket, InstanceType, make_buckets, solve_melange
from hetplan.solvers.melange_capacity import aggregated_capacity

STATS = LengthStats(np.array([100]), np.array([10]), 0.9)


def golden(k: int):
    """DESIGN §3.2: two types, 2x2 buckets, lambda = 30 req/s."""
    shares = [0.2, 0.1, 0.5, 0.2]
    buckets = [Bucket(0, 1, 0, 1, s, STATS) for s in shares]
    types = [InstanceType("A10G", 1, 1.01, (2, 1, 5, 2)), InstanceType("A100-80GB-SXM", 1, 3.67, (20, 20, 40, 20))]
    return solve_melange(types, buckets, 30.0, k)


def test_golden_k1():
    plan = golden(1)
    assert plan.counts == (3, 1)
    assert plan.total_usd_per_hour == pytest.approx(6.70)


@pytest.mark.parametrize("k", [2, 4, 8])
def test_golden_finer_slices(k):
    plan = golden(k)
    assert plan.counts == (2, 1)
    assert plan.total_usd_per_hour == pytest.approx(5.69)


def test_finer_slicing_never_costs_more_and_respects_lp_bound():
    costs = {k: golden(k).total_usd_per_hour for k in (1, 2, 4, 8)}
    assert costs[2] <= costs[1] and costs[4] <= costs[2] and costs[8] <= costs[4]
    for k in costs:
        assert costs[k] >= golden(k).lower_bound_usd_per_hour - 1e-9


def test_cost_non_decreasing_in_demand():
    shares = [0.2, 0.1, 0.5, 0.2]
    buckets = [Bucket(0, 1, 0, 1, s, STATS) for s in shares]
    types = [InstanceType("A10G", 1, 1.01, (2, 1, 5, 2)), InstanceType("A100-80GB-SXM", 1, 3.67, (20, 20, 40, 20))]
    costs = [solve_melange(types, buckets, lam, 4).total_usd_per_hour for lam in (5, 10, 20, 30, 60)]
    assert costs == sorted(costs)


def test_inventory_row():
    buckets = [Bucket(0, 1, 0, 1, 1.0, STATS)]
    types = [InstanceType("A", 1, 1.0, (1.0,)), InstanceType("B", 1, 5.0, (10.0,))]
    assert solve_melange(types, buckets, 3.0, 1).counts == (3, 0)
    assert solve_melange(types, buckets, 3.0, 1, {"A": 2}).counts == (0, 1)


def test_buckets_partition_the_workload():
    rng = np.random.default_rng(0)
    stats = LengthStats(rng.integers(1, 20000, 1000), rng.integers(1, 3000, 1000), 0.9)
    buckets = make_buckets(stats)
    assert sum(b.share for b in buckets) == pytest.approx(1.0)
    assert sum(b.stats.prompt_tokens.size for b in buckets) == 1000
    assert all(
        b.prompt_lo <= b.stats.prompt_tokens.min() and b.stats.prompt_tokens.max() < b.prompt_hi for b in buckets
    )
    assert math.isinf(buckets[-1].prompt_hi) or buckets[-1].prompt_hi > 0


def test_aggregated_capacity_monotone_in_slo():
    from hetplan.catalog import find_gpu, find_model
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.latency import InstanceModel

    inst = InstanceModel(ModelArch(find_model("Llama-3-8B")), find_gpu("H100"), 1)
    stats = LengthStats(np.full(50, 1000), np.full(50, 200), 0.9)
    loose = aggregated_capacity(inst, stats, 2.0, 0.1)
    tight = aggregated_capacity(inst, stats, 0.5, 0.03)
    assert loose > tight > 0
    assert aggregated_capacity(inst, stats, 2.0, 0.001) == 0.0
