"""Scheduling policies on a mixed workload with a short chat class and a long-context class (issue 18).

Workload (real traces from ../shared/data/traces, the first ``--minutes`` of each, each on its own clock from 0):

- ``chat``: Azure LLM inference trace 2023, conversation service (Patel et al., Splitwise, ISCA 2024);
- ``code``: the same trace's code-completion service (longer prompts, short outputs);
- ``long``: the Mooncake FAST'25 trace (kvcache-ai/Mooncake), requests with prompts of 4k–32k tokens only
  (the class the CASCADE claim is about; shorter ones overlap the chat class, longer ones are left out).

There is no long-output (reasoning) class: the ServeGen data in ../shared holds one language client's length PDFs,
not reasoning traces, and no other stored trace has outputs of thousands of tokens.

SLOs are set by a rule fixed before any policy was run, scaled to each class's work on an idle instance:
TTFT SLO = 0.5 s + 5 × the model's prefill latency of the class's p90 prompt, rounded up to 0.5 s; TPOT SLO =
max(100 ms, 2 × a decode step of 64 sequences at the class's p90 context), rounded up to 10 ms.

Deployment: Llama-3.1-8B (bf16, 128k context) on 4 aggregated H100-SXM instances (TP1, vLLM-like chunked prefill
of 2,048 tokens, 256 sequences), one shared queue. **1× load** is the deployment's goodput capacity under FCFS:
the highest rate scale of the mixed trace at which FCFS holds 90 % joint attainment (found by bisection first);
the sweep then runs 1×, 1.5×, 2×, 3× of it. Policies: FCFS, SJF by prompt (``sjf``), SJF by total work with the
output known (``oracle-sjf-total``, an oracle reference), EDF, CASCADE with κ calibrated per class at 1×
(q = 0.95) and with κ = 1, each at q₂ ∈ {0, 0.1, 0.2},
and CASCADE with the other Tier-2 order (``largest-budget``) at calibrated κ, q₂ 0.1.

κ is fitted at 1× and q₂ chosen at 2× (at 1× Tier 2 is empty and every q₂ ties) by goodput × Jain.

A second deployment under KV pressure (``--kv-util``, default 0.3 of HBM: 63,824 KV tokens per instance) runs
the same policies at 1× with the same host KV tier available to every policy (256 GiB DRAM at 25 GB/s, then SSD at
5 GB/s per instance): preemption, restore and recompute counts are printed.

Printed per run: goodput in requests/s and in tokens/s (prompt + output tokens of requests that met both SLOs, per
second of serving span), joint attainment, per-class attainment, attainment by prompt-length band, Jain's index
over the classes. The script reports what hetplan's simulator gives; it asserts nothing.

``--mix chat-reasoning`` (issue 32) replaces the three classes with ``chat`` (the Azure conversation trace) and
``reasoning``, a synthetic long-output stream (no stored trace has one): Poisson arrivals at 25 % of the chat
class's request count over the same span, lognormal prompts (median 512) and outputs (median 2,048, sigma 0.6,
cap 16k), seed 0. SLOs: chat TTFT 1 s / TPOT 100 ms, reasoning TTFT 2 s / TPOT 50 ms (its own TPOT; the rule
above gives both classes 1 s / 100 ms). Same deployment, capacity search and calibration; no KV-pressure run.
``--seeds N`` repeats the mix for reasoning seeds 0..N-1 (each with its own capacity and calibration) and prints
each seed's goodput and Jain for FCFS, SJF, EDF and calibrated CASCADE, and their means.

``--prefix-reuse SHARE,SYSTEM_TOKENS`` (issue 32; off by default: every prompt token is computed) gives each class
prefix blocks from the declared reuse model (:func:`hetplan.workload.prefix.declared_reuse`: a request continues
one of its class's 8 latest sessions with probability SHARE, and every request of a class starts with its own
SYSTEM_TOKENS-token system prompt; seed = the class's index), turns on each instance's prefix cache and gives every
policy the host KV tier above (prefix blocks evicted from HBM spill to it); requests still go through the shared
queue. The prefix counters (HBM, DRAM, SSD hits) are printed per run. Neither trace carries ``hash_ids``: the reuse
is declared, not measured.

CASCADE's q₂ is calibrated per class too (``q2_by_class``, kept only where it beats the single q₂). In the
chat + reasoning mix the row ``cascade tuned`` scales the calibrated κ (every class's) by the factor of
:data:`KAPPA_FACTORS` with the best goodput × Jain at 2× (the same objective and load q₂ is chosen at), with the
calibrated q₂; ``--seeds`` applies seed 0's factor unchanged to the other seeds (out of sample for them).

Usage: python benchmarks/scheduling.py [--minutes 10] [--scales 1,1.5,2,3] [--data ../shared/data]
       [--mix three|chat-reasoning] [--seeds N] [--prefix-reuse 0.5,1024]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from hetplan.perf.settings import PerfSettings
from hetplan.sim.calibrate import calibrate_fit
from hetplan.sim.deployment import Deployment, simple_deployment
from hetplan.sim.engine import SimConfig, Simulator
from hetplan.sim.hostkv import HostKvTier
from hetplan.sim.metrics import measure, outcomes
from hetplan.sim.policies import CascadeSettings, get_scheduler
from hetplan.workload.model import ClassSlo, RequestStream, make_stream
from hetplan.workload.prefix import concat_block_hashes, declared_reuse
from hetplan.workload.readers import read_stream

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
MODEL, GPU, INSTANCES, CHUNK = "Llama-3.1-8B", "H100-SXM", 4, 2048
BANDS = ((0, 1024), (1024, 4096), (4096, 8192), (8192, 16384), (16384, 32769))
BAND_NAMES = ("<1k", "1-4k", "4-8k", "8-16k", "16-32k")
HOST = HostKvTier(dram_gib=256.0, dram_gb_per_s=25.0, ssd_gb_per_s=5.0)


def load_mix(data: Path, minutes: float) -> RequestStream:
    """The three classes, each trace's first ``minutes`` from its own 0, mixed by arrival time."""
    parts = []
    for name, file in (("chat", "AzureLLMInferenceTrace_conv.csv"), ("code", "AzureLLMInferenceTrace_code.csv"),
                       ("long", "mooncake_synthetic_trace.jsonl")):  # fmt: skip
        s = read_stream([data / "traces" / file])
        a = s.arrival_s - s.arrival_s[0]
        keep = a <= minutes * 60
        if name == "long":
            keep &= (s.prompt_tokens >= 4096) & (s.prompt_tokens <= 32768)
        parts.append((a[keep], s.prompt_tokens[keep], s.output_tokens[keep], [name] * int(keep.sum())))
    arr = np.concatenate([p[0] for p in parts])
    return make_stream(arr, np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]),
                       sum((p[3] for p in parts), []), source="Azure conv + Azure code + Mooncake 4k-32k")  # fmt: skip


#: The reasoning stream of ``--mix chat-reasoning`` (synthetic: no stored trace has long outputs): its share of the
#: chat class's requests, lognormal prompt and output medians (tokens) and sigma, and the output cap.
REASONING_SHARE, REASONING_PROMPT, REASONING_OUTPUT, REASONING_SIGMA, REASONING_MAX = 0.25, 512, 2048, 0.6, 16384


#: SLOs of ``--mix chat-reasoning``: chat a 1 s TTFT (and the rule's 100 ms TPOT), reasoning its own TPOT of 50 ms
#: (a reader follows a long answer as it streams) and a 2 s TTFT.
CHAT_SLO, REASONING_SLO = ClassSlo(1.0, 0.1), ClassSlo(2.0, 0.05)


def load_chat_reasoning(data: Path, minutes: float, seed: int = 0) -> RequestStream:
    """``chat`` (the Azure conversation trace's first ``minutes``) mixed with ``reasoning``: Poisson arrivals at
    :data:`REASONING_SHARE` of the chat rate over the same span, lognormal prompts and outputs (seed ``seed``)."""
    s = read_stream([data / "traces" / "AzureLLMInferenceTrace_conv.csv"])
    a = s.arrival_s - s.arrival_s[0]
    keep = a <= minutes * 60
    span = float(a[keep].max())
    rng = np.random.default_rng(seed)
    n = int(round(REASONING_SHARE * int(keep.sum())))
    r_arr = np.sort(rng.uniform(0.0, span, n))  # n uniform points on the span: Poisson arrivals given their count
    r_prompt = np.maximum(1, rng.lognormal(math.log(REASONING_PROMPT), REASONING_SIGMA, n)).astype(np.int64)
    r_out = np.clip(rng.lognormal(math.log(REASONING_OUTPUT), REASONING_SIGMA, n), 1, REASONING_MAX).astype(np.int64)
    return make_stream(np.concatenate([a[keep], r_arr]), np.concatenate([s.prompt_tokens[keep], r_prompt]),
                       np.concatenate([s.output_tokens[keep], r_out]), ["chat"] * int(keep.sum()) + ["reasoning"] * n,
                       source="Azure conv + synthetic reasoning")  # fmt: skip


def with_reuse(stream: RequestStream, share: float, system_tokens: int) -> RequestStream:
    """``stream`` with prefix blocks from the declared reuse model, drawn per class (each class its own sessions and
    system prompt, seed = class index; ids of different classes never match)."""
    groups = [np.flatnonzero(stream.class_id == c) for c in range(len(stream.class_names))]
    parts = [declared_reuse(stream.prompt_tokens[g], share, system_tokens, seed=c) for c, g in enumerate(groups)]
    order = np.concatenate(groups)
    return stream.with_prefix_blocks(concat_block_hashes(parts).take(np.argsort(order, kind="stable")))


KAPPA_FACTORS = (1.0, 1.5, 2.0, 3.0)
"""Multiples of the calibrated κ that ``cascade tuned`` chooses from (module docstring)."""


def scaled_kappa(settings: CascadeSettings, factor: float) -> CascadeSettings:
    """``settings`` with κ, overall and per class, times ``factor``."""
    by = tuple((c, factor * k) for c, k in settings.kappa_by_class)
    return replace(settings, kappa=factor * settings.kappa, kappa_by_class=by)


def tune_kappa(dep: Deployment, stream: RequestStream, settings: CascadeSettings, sim_cfg: SimConfig,
               scale: float) -> tuple[float, list[tuple[float, float]]]:  # fmt: skip
    """The factor of :data:`KAPPA_FACTORS` with the best goodput × Jain at rate scale ``scale`` (ties: the smaller),
    and each factor's objective."""
    sweep = []
    for f in KAPPA_FACTORS:
        m = run(dep, stream, "cascade", scaled_kappa(settings, f), sim_cfg, scale)
        sweep.append((f, float(m["goodput_req_per_s"]) * float(m["jain_index"] or 0.0)))
    return max(sweep, key=lambda x: (x[1], -x[0]))[0], sweep


def settings_from(block: dict[str, Any]) -> CascadeSettings:
    """CASCADE's settings from a calibration block (κ and q₂, each overall and per class)."""
    return CascadeSettings(kappa=block["kappa"], q2=block["q2"], kappa_by_class=tuple(block["kappa_by_class"].items()),
                           q2_by_class=tuple(sorted(block.get("q2_by_class", {}).items())))  # fmt: skip


def slo_rule(dep: Deployment, stream: RequestStream) -> dict[str, ClassSlo]:
    """The SLO rule of the module docstring, per class."""
    model = dep.model(GPU, 1)
    out = {}
    for c, name in enumerate(stream.class_names):
        m = stream.class_id == c
        p90 = float(np.percentile(stream.prompt_tokens[m], 90))
        ctx = float(np.percentile(stream.prompt_tokens[m] + stream.output_tokens[m], 90))
        ttft = math.ceil((0.5 + 5 * float(model.prefill_latency_s(p90, 1))) * 2) / 2
        step = float(model.decode_step_latency_s(64, ctx))
        tpot = math.ceil(max(0.1, 2 * step) * 100) / 100
        out[name] = ClassSlo(ttft, tpot)
    return out


def run(dep: Deployment, stream: RequestStream, policy: str, cfg: CascadeSettings | None, sim_cfg: SimConfig,
        scale: float) -> dict[str, Any]:  # fmt: skip
    """One run: the metrics document plus goodput in tokens and attainment by prompt band."""
    scaled = stream.scaled(scale)
    start = time.perf_counter()
    res = Simulator(dep, scaled, get_scheduler(policy, cfg), sim_cfg).run()
    m = measure(scaled, res).to_doc()
    o = outcomes(scaled, res)
    span = m["serving_span_s"] or 1e-9
    good_tokens = float((scaled.prompt_tokens + o.output_tokens)[o.ok].sum())
    m["goodput_tokens_per_s"] = good_tokens / span
    m["bands"] = {}
    for (lo, hi), label in zip(BANDS, BAND_NAMES, strict=True):
        sel = (scaled.prompt_tokens >= lo) & (scaled.prompt_tokens < hi)
        m["bands"][label] = float(o.ok[sel].mean()) if sel.any() else None
    m["seconds"] = time.perf_counter() - start
    return m


def fcfs_capacity(dep: Deployment, stream: RequestStream, sim_cfg: SimConfig, target: float = 0.9) -> float:
    """Highest rate scale with FCFS joint attainment ≥ ``target`` (doubling/halving, then 5 bisection steps)."""

    def ok(x: float) -> bool:
        return float(run(dep, stream, "fcfs", None, sim_cfg, x)["attainment"]["joint"]) >= target

    if ok(1.0):
        lo, hi = 1.0, 2.0
        while hi <= 64 and ok(hi):
            lo, hi = hi, hi * 2
    else:
        lo, hi = 0.5, 1.0
        while lo >= 1 / 64 and not ok(lo):
            lo, hi = lo / 2, lo
    for _ in range(5):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def policies(kappa: CascadeSettings) -> list[tuple[str, str, CascadeSettings | None]]:
    k1 = replace(kappa, kappa=1.0, kappa_by_class=())
    rows: list[tuple[str, str, CascadeSettings | None]] = [
        ("fcfs", "fcfs", None),
        ("sjf", "sjf", None),
        ("sjf-total", "oracle-sjf-total", None),
        ("edf", "edf", None),
    ]
    for q2 in (0.0, 0.1, 0.2):
        rows.append((f"cascade q2={q2:g}", "cascade", replace(kappa, q2=q2)))
    for q2 in (0.0, 0.1, 0.2):
        rows.append((f"cascade k=1 q2={q2:g}", "cascade", replace(k1, q2=q2)))
    rows.append(("cascade t2=largest", "cascade", replace(kappa, q2=0.1, tier2_order="largest-budget")))
    return rows  # fmt: skip


def table(title: str, results: list[tuple[float, str, dict[str, Any]]], names: tuple[str, ...]) -> None:
    print(f"\n{title}")
    head = (f"{'load':>4} {'policy':22} {'good r/s':>8} {'good tok/s':>10} {'attain':>6} "
            + " ".join(f"{n:>6}" for n in names) + " | " + " ".join(f"{b:>6}" for b in BAND_NAMES)
            + f" {'Jain':>6} {'pre':>5} {'rest':>5} {'recmp':>5} {'unfin':>5} {'s':>4}")  # fmt: skip
    print(head)
    for load, label, m in results:
        by = {c["class"]: c["attainment"] for c in m["classes"]}
        jain = "-" if m["jain_index"] is None else f"{m['jain_index']:.3f}"
        bands = " ".join("     -" if v is None else f"{v:6.1%}" for v in m["bands"].values())
        cnt = m["counters"]
        print(f"{load:4g} {label:22} {m['goodput_req_per_s']:8.3f} {m['goodput_tokens_per_s']:10.0f} "
              f"{m['attainment']['joint']:6.1%} " + " ".join(f"{by[n]:6.1%}" for n in names) + f" | {bands} "
              f"{jain:>6} {cnt['preemptions']:5.0f} {cnt['restores']:5.0f} {cnt['recomputes']:5.0f} "
              f"{m['unfinished']:5d} {m['seconds']:4.1f}" + prefix_note(cnt))  # fmt: skip


def prefix_note(cnt: dict[str, float]) -> str:
    """The run's prefix-cache hits per tier, in blocks, of the blocks looked up ("" without prefix caching)."""
    if "prefix_hit_blocks" not in cnt:
        return ""
    looked = cnt["prefix_hit_blocks"] + cnt["prefix_miss_blocks"]
    return (f" prefix hits HBM {cnt['prefix_hit_blocks']:.0f} DRAM {cnt.get('prefix_dram_hit_blocks', 0):.0f} "
            f"SSD {cnt.get('prefix_ssd_hit_blocks', 0):.0f} of {looked:.0f} blocks")  # fmt: skip


def seed_summary(args: argparse.Namespace, dep: Deployment, loads: list[float], factor: float) -> None:
    """``--seeds``: the chat + reasoning mix for each reasoning seed (its own 1x capacity, κ at 1x, q₂ at 2x):
    goodput (req/s) and Jain of FCFS, SJF, EDF, calibrated CASCADE and CASCADE with κ × ``factor`` (seed 0's tuned
    factor) per seed and load, then the means."""
    sim_cfg = sim_config(args)
    labels = ("fcfs", "sjf", "edf", "cascade", "tuned")
    table_: dict[tuple[float, str], list[tuple[float, float]]] = {}
    print("\nper reasoning seed (goodput req/s / Jain); CASCADE with kappa per class at 1x, q2 at 2x")
    print(f"{'seed':>4} {'load':>4} " + " ".join(f"{x:>15}" for x in labels) + f" {'cascade/sjf':>11} {'tuned/sjf':>9}")
    for seed in range(args.seeds):
        stream = load_chat_reasoning(args.data, args.minutes, seed).with_slos(
            2.0, 0.1, {"chat": CHAT_SLO, "reasoning": REASONING_SLO}
        )
        if args.prefix_reuse:
            stream = with_reuse(stream, *args.prefix_reuse)
        cap = fcfs_capacity(dep, stream, sim_cfg)
        block = calibrate_fit(dep, stream.scaled(cap), config=sim_cfg, quantile=0.95, rate_scale=cap,
                                     q2_stream=stream.scaled(2 * cap)).to_doc()  # fmt: skip
        kappa = settings_from(block)
        for load in loads:
            cells = []
            for label in labels:
                cfg = {"cascade": kappa, "tuned": scaled_kappa(kappa, factor)}.get(label)
                m = run(dep, stream, "cascade" if label == "tuned" else label, cfg, sim_cfg, load * cap)
                got = (float(m["goodput_req_per_s"]), float(m["jain_index"] or 0.0))
                table_.setdefault((load, label), []).append(got)
                cells.append(got)
            ratio = cells[3][0] / cells[1][0] if cells[1][0] else float("nan")
            tuned = cells[4][0] / cells[1][0] if cells[1][0] else float("nan")
            print(f"{seed:4d} {load:4g} " + " ".join(f"{g:8.3f} / {j:.3f}" for g, j in cells)
                  + f" {ratio:11.3f} {tuned:9.3f}")  # fmt: skip
    for load in loads:
        got = {x: table_[(load, x)] for x in labels}
        mean = {x: (float(np.mean([g for g, _ in v])), float(np.mean([j for _, j in v]))) for x, v in got.items()}
        print(f"mean {load:4g} " + " ".join(f"{mean[x][0]:8.3f} / {mean[x][1]:.3f}" for x in labels)
              + f" {mean['cascade'][0] / mean['sjf'][0]:11.3f} {mean['tuned'][0] / mean['sjf'][0]:9.3f}")  # fmt: skip


def sim_config(args: argparse.Namespace) -> SimConfig:
    """The runs' settings: with ``--prefix-reuse`` the host tier for every policy (the shared queue routes: here the
    ``prefix`` router's affinity costs more than its few extra hits, docs/cascade.md)."""
    return SimConfig(host_kv=HOST) if args.prefix_reuse else SimConfig()


def reuse_arg(text: str) -> tuple[float, int]:
    """``SHARE,SYSTEM_TOKENS`` of ``--prefix-reuse``."""
    share, tokens = text.split(",")
    return float(share), int(tokens)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0, help="replay the first N minutes of each trace")
    ap.add_argument("--scales", default="1,1.5,2,3", help="loads, as multiples of the FCFS capacity")
    ap.add_argument("--kv-util", type=float, default=0.3, help="gpu_memory_utilization of the KV-pressure run")
    ap.add_argument("--data", type=Path, default=DATA, help="the shared data folder (default ../shared/data)")
    ap.add_argument("--mix", choices=("three", "chat-reasoning"), default="three",
                    help="three: chat + code + long-context traces; chat-reasoning: chat trace + synthetic "
                    "long-output stream (no KV-pressure run)")  # fmt: skip
    ap.add_argument("--seeds", type=int, default=1, help="chat-reasoning: repeat for reasoning seeds 0..N-1")
    ap.add_argument("--prefix-reuse", type=reuse_arg, default=None, metavar="SHARE,SYSTEM_TOKENS",
                    help="declared prefix reuse per class, e.g. 0.5,1024")  # fmt: skip
    args = ap.parse_args()
    files: tuple[str, ...] = ("AzureLLMInferenceTrace_conv.csv",)
    if args.mix == "three":
        files += ("AzureLLMInferenceTrace_code.csv", "mooncake_synthetic_trace.jsonl")
    missing = [f for f in files if not (args.data / "traces" / f).is_file()]
    if missing:
        print(f"missing {args.data / 'traces' / missing[0]}: pass --data PATH/TO/shared/data", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    dep = simple_deployment(model=MODEL, gpu=GPU, count=INSTANCES, max_num_batched_tokens=CHUNK)
    raw = load_mix(args.data, args.minutes) if args.mix == "three" else load_chat_reasoning(args.data, args.minutes)
    slos = slo_rule(dep, raw)
    if args.mix == "chat-reasoning":  # the classes' own SLOs, as the issue's two-class scenario states them
        slos = {"chat": CHAT_SLO, "reasoning": REASONING_SLO}
    stream = raw.with_slos(2.0, 0.1, slos)
    if args.prefix_reuse:
        stream = with_reuse(stream, *args.prefix_reuse)
    names = stream.class_names
    print(f"{stream.n:,} requests over {stream.duration_s:,.0f} s ({stream.n / stream.duration_s:.2f} req/s); "
          f"{MODEL} on {INSTANCES}x {GPU} TP1, chunked prefill {CHUNK} tokens; "
          + (f"prefix reuse declared: session share {args.prefix_reuse[0]:g}, system prompt {args.prefix_reuse[1]} "
             "tokens per class, shared queue, host tier for every policy" if args.prefix_reuse
             else "prefix reuse off (every prompt token is computed)"))  # fmt: skip
    for c, name in enumerate(names):
        m = stream.class_id == c
        p = stream.prompt_tokens[m]
        print(f"  {name:5} {int(m.sum()):5,} requests, prompt p50 {np.median(p):,.0f} p90 {np.percentile(p, 90):,.0f}, "
              f"output p50 {np.median(stream.output_tokens[m]):,.0f}; SLO TTFT {slos[name].ttft_s:g} s, "
              f"TPOT {slos[name].tpot_s * 1e3:g} ms")  # fmt: skip
    sim_cfg = sim_config(args)
    cap = fcfs_capacity(dep, stream, sim_cfg)
    print(f"1x load = FCFS capacity at 90 % joint attainment: rate scale {cap:.3f} "
          f"({cap * stream.n / stream.duration_s:.2f} req/s)")  # fmt: skip
    start = time.perf_counter()
    block = calibrate_fit(dep, stream.scaled(cap), config=sim_cfg, quantile=0.95, rate_scale=cap,
                                 q2_stream=stream.scaled(2 * cap)).to_doc()  # fmt: skip
    by_class = block["kappa_by_class"]
    kappa = settings_from(block)
    sweep = ", ".join(f"{r['q2']:g}: {r['objective']:.3f}" for r in block["q2_sweep"])
    print(
        f"calibrated kappa at 1x, q2 at 2x, in {time.perf_counter() - start:.1f} s: kappa {block['kappa']:.4g} "
        f"(coverage {block['coverage']:.1%}), per class "
        + ", ".join(f"{k} {v:.4g}" for k, v in by_class.items())
        + f"; q2 by goodput x Jain: {block['q2']:g} ({sweep})"
        + f"; q2 per class: {block.get('q2_by_class') or 'none beats the single q2'}"
    )
    rows = policies(kappa)
    rows.insert(4, ("cascade calibrated", "cascade", kappa))
    factor = 1.0
    if args.mix == "chat-reasoning":  # κ's factor chosen at 2x by goodput x Jain, as q2 is
        factor, ksweep = tune_kappa(dep, stream, kappa, sim_cfg, 2 * cap)
        print(f"kappa factor by goodput x Jain at 2x: {factor:g} (" + ", ".join(f"{f:g}: {o:.3f}" for f, o in ksweep)
              + ")")  # fmt: skip
        rows.insert(5, (f"cascade tuned k x{factor:g}", "cascade", scaled_kappa(kappa, factor)))
    results = []
    for load in (float(x) for x in args.scales.split(",")):
        for label, policy, cfg in rows:
            results.append((load, label, run(dep, stream, policy, cfg, sim_cfg, load * cap)))
    table("goodput = requests (tokens) meeting both SLOs / serving span; attainment per class | by prompt band",
          results, names)  # fmt: skip
    if args.mix != "three" and args.seeds > 1:
        seed_summary(args, dep, [float(x) for x in args.scales.split(",")], factor)
    if args.mix != "three":  # the chat + reasoning mix: the load sweep only
        print(f"\ntotal {time.perf_counter() - t0:.0f} s")
        return 0
    kv = simple_deployment(model=MODEL, gpu=GPU, count=INSTANCES, max_num_batched_tokens=CHUNK,
                           settings=PerfSettings(gpu_memory_utilization=args.kv_util))  # fmt: skip
    kv_cap = kv.model(GPU, 1).kv_capacity_tokens
    kv_cfg = SimConfig(host_kv=HOST)
    pressure = [(1.0, label, run(kv, stream, policy, cfg, kv_cfg, cap)) for label, policy, cfg in rows]
    table(f"KV pressure at 1x: gpu_memory_utilization {args.kv_util:g} ({kv_cap:,} KV tokens per instance), host "
          f"tier for every policy ({HOST.dram_gib:g} GiB DRAM at {HOST.dram_gb_per_s:g} GB/s, SSD at "
          f"{HOST.ssd_gb_per_s:g} GB/s)", pressure, names)  # fmt: skip
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
