"""Prefix caching (issue 32): the Mooncake reader keeps ``hash_ids``, the block cache's hits, misses and evictions,
the simulator's per-instance caches and the prefix router, and the declared reuse model."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hetplan.errors import InputError
from hetplan.sim.deployment import simple_deployment
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.policies import get_scheduler
from hetplan.workload.prefix import (
    BlockCache,
    block_hashes_from_lists,
    declared_reuse,
    hit_tokens_single_cache,
)
from hetplan.workload.readers import load_workload, read_stream

# Three sessions of known 512-token blocks, one request a second (each ends long before the next arrives):
# (prompt tokens, hash_ids). Reusable blocks are the full blocks before the last prompt token, (prompt - 1) // 512.
SESSIONS = [
    (1100, [1, 2, 3]),  # 2 reusable: [1, 2], nothing cached: 2 misses
    (2000, [1, 2, 4, 5]),  # 3 reusable: [1, 2, 4]; 1, 2 cached: 2 hits, 1 miss
    (1600, [10, 11, 12, 13]),  # 3 reusable, a new session: 3 misses
    (2600, [1, 2, 4, 5, 6, 7]),  # 5 reusable: [1, 2, 4, 5, 6]; 1, 2, 4 cached: 3 hits, 2 misses
    (1536, [10, 11, 12]),  # exactly 3 blocks: the last token is computed, 2 reusable, both cached: 2 hits
    (300, [1]),  # shorter than a block: no lookup
]
HITS, MISSES = 7, 8


def _write(path: Path, rows: list[tuple[int, list[int]]], ids: bool = True) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i, (prompt, hashes) in enumerate(rows):
            rec: dict[str, object] = {"timestamp": 1000 * i, "input_length": prompt, "output_length": 2}
            if ids:
                rec["hash_ids"] = hashes
            fh.write(json.dumps(rec) + "\n")
    return path


def test_the_mooncake_reader_keeps_hash_ids_compactly(tmp_path):
    wl = load_workload(_write(tmp_path / "s.jsonl", SESSIONS))
    blocks = wl.prefix_blocks
    assert blocks is not None and blocks.ids.dtype == np.int64 and blocks.block_tokens == 512
    assert blocks.offsets.tolist() == [0, 3, 7, 11, 17, 20, 21]
    assert [blocks.of(i).tolist() for i in range(6)] == [h for _, h in SESSIONS]
    assert blocks.take(np.array([4, 0])).ids.tolist() == [10, 11, 12, 1, 2, 3]
    assert load_workload(_write(tmp_path / "n.jsonl", SESSIONS, ids=False)).prefix_blocks is None


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}', "3 hash_ids for a prompt"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, "a"]}', "list of whole numbers"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": 7}', "list of whole numbers"),
    ],
)
def test_bad_hash_ids_are_refused_with_the_line(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=match) as err:
        load_workload(path)
    assert "bad.jsonl:1" in err.value.what


def test_hash_ids_on_some_records_only_are_refused(tmp_path):
    path = tmp_path / "mixed.jsonl"
    _write(path, SESSIONS[:1])
    with open(path, "a", encoding="utf-8") as fh:
        fh.write('{"timestamp": 5, "input_length": 600, "output_length": 1}\n')
    with pytest.raises(InputError, match="some records only") as err:
        load_workload(path)
    assert "mixed.jsonl:2" in err.value.what


def test_the_block_cache_evicts_least_recent_and_keeps_prefixes_whole():
    cache = BlockCache()
    a, b = np.array([1, 2, 3]), np.array([7, 8])
    cache.insert(a, 3, capacity_blocks=4)
    cache.insert(b, 2, capacity_blocks=4)  # 5 blocks > 4: the oldest request's tail block (3) goes first
    assert cache.evictions == 1 and cache.match(a, 3) == 2
    m = cache.match(a, 3)
    cache.use(a, 3, m)
    assert (cache.hits, cache.misses) == (2, 1)
    cache.trim(1)  # a's prefix was used last: its first block stays
    assert list(cache.blocks) == [1]


def test_a_hand_checkable_trace_gives_exactly_the_expected_hits(tmp_path):
    stream = read_stream([str(_write(tmp_path / "sessions.jsonl", SESSIONS))])
    dep = simple_deployment()  # one aggregated H100 instance: its KV holds every block
    on = Simulator(dep, stream, get_scheduler("fcfs")).run()
    c = on.counters
    assert (c["prefix_hit_blocks"], c["prefix_miss_blocks"], c["prefix_evicted_blocks"]) == (HITS, MISSES, 0)
    assert c["prefix_hit_tokens"] == HITS * 512
    assert c["prefix_lookup_tokens"] == sum(p for p, _ in SESSIONS)
    # the planner's single-cache replay agrees request by request
    hits = hit_tokens_single_cache(stream.prefix_blocks, stream.prompt_tokens, 10_000)
    assert (hits // 512).tolist() == [0, 2, 0, 3, 2, 0]
    off = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(prefix_cache=False)).run()
    assert "prefix_hit_blocks" not in off.counters
    ttft_on, ttft_off = on.first_token_s - stream.arrival_s, off.first_token_s - stream.arrival_s
    assert ttft_on[0] == pytest.approx(ttft_off[0])  # nothing cached yet
    assert ttft_on[3] < ttft_off[3] and ttft_on[4] < ttft_off[4]  # 3 and 2 blocks not computed again


def test_each_instance_has_its_own_cache_and_the_prefix_router_keeps_sessions_together(tmp_path):
    rows = [(2000, [1, 2, 3, 4]), (2000, [9, 8, 7, 6])] * 4  # two sessions, alternating
    stream = read_stream([str(_write(tmp_path / "two.jsonl", rows))])
    from hetplan.plan.doc import load_plan
    from hetplan.sim.deployment import deployment_from_plan
    from tests.conftest import FIXTURES

    dep = deployment_from_plan(load_plan(FIXTURES / "plan_two_combos.json"))
    rr = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(router="round-robin")).run().counters
    px = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(router="prefix")).run().counters
    assert px["prefix_hit_blocks"] == 6 * 3  # after each session's first request, every later one hits 3 blocks
    assert rr["prefix_hit_blocks"] <= px["prefix_hit_blocks"]
    with pytest.raises(InputError, match="prefix router needs prefix caching"):
        Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(router="prefix", prefix_cache=False))


def test_the_declared_reuse_model_shares_the_system_prompt_and_continues_sessions():
    prompts = np.array([3000, 3000, 4000, 5000, 1000])
    none = declared_reuse(prompts, 0.0, 1024)
    assert all(none.of(i)[:2].tolist() == [0, 1] for i in range(5))  # the 2 system-prompt blocks
    hits = hit_tokens_single_cache(none, prompts, 10_000)
    assert hits.tolist() == [0, 1024, 1024, 1024, 512]  # a 1,000-token prompt reuses one full block
    every = declared_reuse(prompts, 1.0, 0)
    assert hit_tokens_single_cache(every, prompts, 10_000).sum() > 0
    assert (
        declared_reuse(prompts, 0.5, 512, seed=3).ids.tolist() == declared_reuse(prompts, 0.5, 512, seed=3).ids.tolist()
    )
    with pytest.raises(InputError, match="session_share"):
        declared_reuse(prompts, 1.5, 0)


def test_packing_lists_round_trips():
    b = block_hashes_from_lists([[5], [], [6, 7]])
    assert b.offsets.tolist() == [0, 1, 1, 3] and b.of(2).tolist() == [6, 7] and b.of(1).size == 0


# -- sizing (hetplan.planning.prefix, hetplan.perf.capacity) --------------------------------------------------


def _scenario(
    prefix_cache: str,
    reuse: dict[str, object] | None = None,
    path: Path | None = None,
    goodput_req_per_s: float | None = None,
):
    from hetplan.scenario import Scenario
    from tests.conftest import EXAMPLES

    workload: dict[str, object] = {
        "path": str(path or EXAMPLES / "data" / "mooncake_reuse_493.jsonl"),
        "prefix_cache": prefix_cache,
    }
    if reuse is not None:
        workload["reuse"] = reuse
    return Scenario.model_validate(
        {
            "name": "reuse",
            "model": "Llama-3.1-8B",
            "weight_dtype": "bf16",
            "workload": workload,
            "slo": {"ttft": "6s", "tpot": "80ms"},
            "gpus": ["H100", "L40S"],
            "tp": [1, 2, 4],
            "cloud": "aws",
            **({} if goodput_req_per_s is None else {"goodput_req_per_s": goodput_req_per_s}),
        }
    )


def test_the_equal_prefill_work_length_is_exact_for_the_quadratic_flops():
    from hetplan.catalog.loader import find_model
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.capacity_inputs import prefill_work_tokens

    arch = ModelArch(find_model("Llama-3.1-8B"))
    prompts, cached = np.array([8000.0, 8000.0, 300.0]), np.array([0.0, 6144.0, 0.0])
    work = prefill_work_tokens(arch, prompts, cached)
    assert work[0] == 8000 and work[2] == 300  # no hit: the prompt itself
    flops = [float(arch.prefill_flops(np.asarray(x), 1)) for x in (work[1], 8000.0, 6144.0, 0.0)]
    assert flops[0] == pytest.approx(flops[1] - flops[2] + flops[3], rel=1e-9)  # FLOPs(S) - FLOPs(h) + lm head
    assert 8000 - 6144 < work[1] < 8000  # the new tokens still attend to the cached prefix


def test_a_plan_with_reuse_is_cheaper_and_records_what_it_would_cost_without():
    from hetplan import api

    # AWS sells H100s by the 8-GPU p5.48xlarge: a saving shows in dollars only when it crosses a node. Since the
    # kernel-fitted refit, at the trace's own rate reuse saves one H100 (5 against 6) inside the same node, both
    # $98.32/h; at 8 req/s it needs 7 H100s (one node) where the plan without reuse needs 12 (two nodes).
    on = api.to_doc(api.plan(_scenario("auto", goodput_req_per_s=8.0), "cauchy", analysis=False))
    off = api.to_doc(api.plan(_scenario("off", goodput_req_per_s=8.0), "cauchy", analysis=False))
    gpus_on, gpus_off = sum(on["gpus_used"].values()), sum(off["gpus_used"].values())
    assert math.ceil(gpus_on / 8) < math.ceil(gpus_off / 8), f"premise: reuse saves a p5 node ({gpus_on} vs {gpus_off})"
    pc = on["prefix_cache"]
    assert "prefix_cache" not in off
    assert pc["source"] == "hash_ids" and pc["block_tokens"] == 512
    rates = {(r["gpu"], r["tp"]): r["token_hit_rate"] for r in pc["by_instance"]}
    assert rates[("H100-SXM", 4)] > rates[("H100-SXM", 1)] > 0  # a larger KV room caches more
    assert pc["with_reuse_cost_per_hour"] == pytest.approx(on["total_usd_per_hour"])
    # the cost without reuse is exactly the plan with prefix_cache: off
    assert pc["without_reuse"]["cost_per_hour"] == pytest.approx(off["total_usd_per_hour"])
    assert on["total_usd_per_hour"] < off["total_usd_per_hour"]
    assert pc["plan_token_hit_rate"]


def test_the_scenario_switch_refuses_what_cannot_hold(tmp_path):
    from hetplan.planning.request import build_whole_workload
    from tests.conftest import FIXTURES

    with pytest.raises(InputError, match="declares prefix reuse for a trace without hash_ids"):
        build_whole_workload(_scenario("auto", {"session_share": 0.5}))
    plain = FIXTURES / "mooncake_300.jsonl"  # no hash_ids
    with pytest.raises(InputError, match="prefix_cache is on but the workload has no prefix blocks"):
        build_whole_workload(_scenario("on", path=plain))
    assert build_whole_workload(_scenario("auto", path=plain)).prefix_blocks is None
    declared = build_whole_workload(_scenario("auto", {"system_prompt_tokens": 2048}, path=plain)).prefix_blocks
    assert declared is not None and declared.of(0)[:4].tolist() == [0, 1, 2, 3]
    assert build_whole_workload(_scenario("off")).prefix_blocks is None


def test_the_prefix_router_binds_a_follow_up_to_the_instance_holding_its_prefix(tmp_path):
    # two sessions start together on a pool of two instances (one each); each one's follow-up comes when both are
    # idle: the shared queue gives it to the first idle instance, the prefix router to the one with its blocks
    path = tmp_path / "pool.jsonl"
    rows = [(0, [1, 2, 3, 4]), (0, [9, 8, 7, 6]), (10_000, [9, 8, 7, 6]), (20_000, [1, 2, 3, 4])]
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": 2000, "output_length": 2, "hash_ids": h}) + "\n"
            for t, h in rows
        ),
        encoding="utf-8",
    )
    stream = read_stream([str(path)])
    dep = simple_deployment(count=2)  # one group: two aggregated instances sharing one queue
    shared = Simulator(dep, stream, get_scheduler("fcfs")).run().counters
    bound = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(router="prefix")).run().counters
    assert shared["prefix_hit_blocks"] == 3  # session 2's follow-up ran on instance 0, which holds session 1
    assert bound["prefix_hit_blocks"] == 6


def test_a_request_moved_to_a_roomier_group_is_not_bound_to_the_first_groups_cache(tmp_path):
    from hetplan.sim.deployment import Group

    path = tmp_path / "grow.jsonl"
    rows = [(0, 2000, [1, 2, 3, 4]), (10_000, 5000, list(range(1, 11)))]  # the second prompt extends the first
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": p, "output_length": 2, "hash_ids": h}) + "\n"
            for t, p, h in rows
        ),
        encoding="utf-8",
    )
    stream = read_stream([str(path)])
    dep = simple_deployment(count=4)
    dep.groups[:] = [Group("a", 1.0, (0, 1), (0, 1)), Group("b", 1.0, (2, 3), (2, 3))]
    sim = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(router="prefix"))
    sim.group_fit[0] = 3000  # group a holds the first prompt (and its blocks) but not the second
    res = sim.run()
    assert np.isfinite(res.done_s).all() and not res.dropped.any()  # the second went to group b and was served


# Host tiers (issue 32: "CASCADE's host-DRAM/SSD tiers use the same blocks"). Llama-3-8B keeps 128 KiB of KV per
# token: a 512-token block is 1/16 GiB, so HBM holds 2 blocks (prefix_hbm_blocks), DRAM 2 (0.125 GiB), SSD 2.
# Four prompts of 2049 tokens (4 reusable blocks each), one a second, each over before the next:
# R0 [1,2,3,4]: nothing cached, 4 recomputed; HBM keeps 1,2 (a prefix's head is the most recent), 3,4 spill to DRAM.
# R1 [1,2,3,4]: 1,2 from HBM, 3,4 restored from DRAM; HBM again 1,2, DRAM 3,4.
# R2 [10..13]: a new session, 4 recomputed; HBM keeps 10,11 and evicts 1,2,12,13 (in LRU order: 2,1,13,12) to
#     DRAM, whose oldest (4,3,2,1) go to SSD, whose oldest (4,3) are dropped: DRAM 13,12, SSD 2,1.
# R3 [1,2,3,4]: 1,2 restored from SSD, 3 is nowhere: the walk stops, 3,4 recomputed; its insert evicts 11,10,4,3
#     from HBM to DRAM, which spills 13,12,11,10 to SSD, which drops 2,1,13,12.
HOST_ROWS = [
    (2049, [1, 2, 3, 4, 5]),
    (2049, [1, 2, 3, 4, 6]),
    (2049, [10, 11, 12, 13, 14]),
    (2049, [1, 2, 3, 4, 7]),
]


def test_prefix_blocks_evicted_from_hbm_spill_to_dram_then_ssd_and_are_restored(tmp_path):
    from hetplan.sim.hostkv import HostKvTier

    stream = read_stream([str(_write(tmp_path / "host.jsonl", HOST_ROWS))])
    dep = simple_deployment()
    tier = HostKvTier(dram_gib=0.125, dram_gb_per_s=25.0, ssd_gb_per_s=5.0, restore_latency_s=0.001, ssd_gib=0.125)
    cfg = SimConfig(host_kv=tier, prefix_hbm_blocks=2)
    sim = Simulator(dep, stream, get_scheduler("fcfs"), cfg)
    res = sim.run()
    c = res.counters
    assert (c["prefix_hit_blocks"], c["prefix_dram_hit_blocks"], c["prefix_ssd_hit_blocks"]) == (2, 2, 2)
    assert c["prefix_ssd_miss_blocks"] == 4 + 0 + 4 + 2  # recomputed
    assert c["prefix_miss_blocks"] == 16 - 2  # not in HBM
    assert c["prefix_dram_miss_blocks"] == 16 - 2 - 2
    assert c["prefix_evicted_blocks"] == 2 + 2 + 4 + 4  # R3's insert evicts 10, 11, 3, 4 (1, 2 are its head)
    assert c["prefix_dram_evicted_blocks"] == 4 + 4 and c["prefix_ssd_evicted_blocks"] == 2 + 4
    assert c["prefix_hit_tokens"] == 2 * 512 and c["prefix_host_hit_tokens"] == 4 * 512
    # TTFT counts the restore: R1 restores 2 blocks from DRAM, then prefills its last token over 2048 cached ones
    block = 512 * 131072.0
    dram_s, ssd_s = 2 * block / 25e9 + 0.001, 2 * block / 5e9 + 0.001
    assert c["prefix_restore_s"] == pytest.approx(dram_s + ssd_s)
    cost = sim.insts[0].cost
    ttft = res.first_token_s - stream.arrival_s
    assert ttft[1] == pytest.approx(dram_s + cost.mixed_s(1, 2049**2 - 2048**2, 1, 0, 0.0))
    assert ttft[3] == pytest.approx(ssd_s + cost.mixed_s(1025, 2049**2 - 1024**2, 1, 0, 0.0))
    # without the host tier the evicted blocks are gone: R1 and R3 reuse HBM's 1,2 only (R2 evicted them: 0)
    plain = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(prefix_hbm_blocks=2)).run().counters
    assert plain["prefix_hit_blocks"] == 2 + 0 and "prefix_dram_hit_blocks" not in plain
    # R1's DRAM restore (2 blocks at 25 GB/s) beats recomputing them; R3's SSD restore at 5 GB/s (38k tokens/s)
    # does not beat an H100's prefill of this 8B model: restores are always taken, as LMCache loads what it holds
    ttft_plain = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(prefix_hbm_blocks=2)).run().first_token_s
    assert ttft[1] < (ttft_plain - stream.arrival_s)[1]


def test_cascade_spills_prefix_blocks_to_its_own_host_tier(tmp_path):
    stream = read_stream([str(_write(tmp_path / "host.jsonl", HOST_ROWS))])
    res = Simulator(simple_deployment(), stream, get_scheduler("cascade"), SimConfig(prefix_hbm_blocks=2)).run()
    c = res.counters  # CASCADE's default tier (256 GiB of DRAM) keeps every evicted block
    assert (c["prefix_hit_blocks"], c["prefix_dram_hit_blocks"], c["prefix_ssd_hit_blocks"]) == (2, 2 + 4, 0)
    assert c["prefix_ssd_miss_blocks"] == 8


def test_the_prefix_router_spreads_requests_that_share_a_system_prompt(tmp_path):
    # every request starts with the same two blocks (a system prompt), so every instance soon holds them and the
    # router's choice is the load term: it must spread the requests (it sent them all to one instance when its
    # load was a counter that only finishes moved)
    rows = [(i * 20, 2000, [1, 2, 100 + i, 200 + i]) for i in range(60)]
    path = tmp_path / "sys.jsonl"
    path.write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": p, "output_length": 200, "hash_ids": h}) + "\n"
            for t, p, h in rows
        ),
        encoding="utf-8",
    )
    stream = read_stream([str(path)])
    dep = simple_deployment(count=2)
    px = Simulator(dep, stream, get_scheduler("fcfs"), SimConfig(router="prefix")).run()
    shared = Simulator(dep, stream, get_scheduler("fcfs")).run()
    busy = px.busy_s
    assert busy.min() > 0.35 * busy.sum()  # both instances work
    ttft_px = np.percentile(px.first_token_s - stream.arrival_s, 90)
    ttft_shared = np.percentile(shared.first_token_s - stream.arrival_s, 90)
    assert ttft_px < 2 * ttft_shared
