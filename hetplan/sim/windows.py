"""``hetplan simulate --windows N``: a long trace simulated as N time windows in parallel, then merged.

The (scaled) stream's arrival span is cut into ``N`` windows of equal length. Window ``k`` *owns* the requests
that arrive in ``[lo_k, lo_{k+1})`` and the engine iterations that end in that interval (the first window owns
everything before ``lo_1``, the last everything from ``lo_{N-1}`` on). Its run simulates, from an empty
deployment, the requests arriving in ``[lo_k - warmup, lo_{k+1})``: the warm-up requests fill the queues, batches
and KV caches to the state they have at ``lo_k`` in one long run, and are then discarded. The run goes on until
its requests finish (the usual drain limit applies).

Merge: each request's first-token and completion times come from the window that owns it, so every request-level
metric (TTFT, TPOT, E2E, SLO attainment per dimension and class, goodput over the serving span, the time series)
is computed by :func:`hetplan.sim.metrics.measure` exactly as for one run; ITL samples, busy time
(utilisation) and the iteration count come from the iterations each window owns. The other counters (events,
preemptions, KV restores, recomputes, tier-2 tokens) are summed over the window runs and so include the warm-ups.

The router: ``round-robin`` and ``random`` pick a group without looking at the load, so each window starts its
router in the state one long run has at its first request (:func:`router_states` replays the picks of the
requests before it); ``jsq`` follows the load and starts afresh in each window, and so does ``prefix``. Prefix
caches (:mod:`hetplan.sim.prefix`) start empty in each window and fill during its warm-up; their counters, like
the others, are summed over the window runs.

Error, and the tolerance the tests hold it to. With a warm-up longer than the time a request spends in the system
(E2E p99 is 30-45 s on the bundled traces; the default warm-up is 60 s), a queue that drains between bursts
reaches the same state from empty, so the owned requests see what they see in one run, except that window ``k``'s
last requests finish after ``lo_{k+1}`` without the next window's arrivals competing (their E2E comes out a little
shorter). ``tests/unit/test_sim_windows.py`` holds example (a)'s plan on its 15-minute Azure trace (FCFS at 1x,
CASCADE at 1x, 4 windows, 60 s warm-up; joint attainment 97-98 %) to: SLO attainment (joint, TTFT, TPOT) within
0.005, goodput within 1 %, mean, p50, p90 and p99 of TTFT, TPOT, ITL and E2E within 2 %, and equal finished,
dropped and unfinished counts. Measured there: goodput within 0.02 %, latencies within 0.5 % (E2E p99 -1.3 % with
8 windows). A deployment overloaded for longer than the warm-up (its backlog grows through the trace) is outside
that bound, since its state at ``lo_k`` depends on everything before: at 2x the rate (joint attainment 10 %) the
windowed TTFT p90 is half the one-run figure. :func:`simulate_windowed` checks this itself: the requests in the
second half of each warm-up are simulated twice (owned by the window before, and as warm-up), and a warning names
each window where their mean TTFT differs by more than 10 % and 50 ms (raise ``--warmup``, or use fewer windows);
the test checks that the 2x run warns.

Source: hetplan's own reconstruction (time-window decomposition with warm-up, as in parallel discrete-event
simulation of queueing systems).
"""

from __future__ import annotations

import time
from array import array
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from hetplan.errors import InputError
from hetplan.plan.types import Plan
from hetplan.sim.deployment import Deployment, deployment_from_plan
from hetplan.sim.engine import SimConfig, SimResult, Simulator
from hetplan.sim.instance import Instance
from hetplan.sim.metrics import measure
from hetplan.sim.policies import CascadeSettings, get_scheduler, policy_label
from hetplan.sim.predict import OutputPredictor
from hetplan.sim.router import Router
from hetplan.sim.run import SimRequest, default_predictor, host_kv_run, plan_cascade, prepare_run
from hetplan.units import rnd
from hetplan.workload.model import RequestStream

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

MAX_WINDOWS = 1024
RouterState = tuple[dict[int, list[float]], object]
#: A warm-up whose requests' mean TTFT differs from the same requests' in the window before by more than this
#: (relative and absolute) gets a warning.
WARMUP_MISMATCH = (0.10, 0.05)


@dataclass(frozen=True)
class Window:
    """Window ``index``: owns arrivals in ``[lo_s, hi_s)`` (requests ``own_from`` to ``own_to - 1``) and runs
    requests ``run_from`` to ``own_to - 1`` (``run_from`` to ``own_from - 1``: the warm-up)."""

    index: int
    lo_s: float
    hi_s: float
    run_from: int
    own_from: int
    own_to: int


@dataclass(frozen=True)
class WindowResult:
    """One window's run, cut to what it owns: per owned request ``first_token_s``, ``done_s``, ``dropped``,
    ``over_context``; ITL samples and busy seconds per instance of the iterations it owns; the warm-up requests'
    TTFT (``warmup_ttft_s``); the whole run's counters, end time and cut-off; wall seconds."""

    index: int
    first_token_s: np.ndarray
    done_s: np.ndarray
    dropped: np.ndarray
    over_context: np.ndarray
    warmup_ttft_s: np.ndarray
    step_s: np.ndarray
    step_weight: np.ndarray
    entry_gap_s: np.ndarray
    busy_s: np.ndarray
    iterations: int
    counters: dict[str, float]
    end_s: float
    cut_off: bool
    wall_s: float


class _TimedSimulator(Simulator):
    """The simulator, also recording when each iteration ended (which window owns its samples)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.step_t = array("d")
        self.gap_t = array("d")
        self.iter_t = array("d")
        self.iter_inst = array("l")
        self.iter_dur = array("d")

    def _step_end(self, inst: Instance, now: float) -> None:
        n_step, n_gap = len(self.step_s), len(self.entry_gap)
        self.iter_t.append(now)
        self.iter_inst.append(inst.idx)
        self.iter_dur.append(now - inst.step_start)
        super()._step_end(inst, now)
        self.step_t.extend([now] * (len(self.step_s) - n_step))
        self.gap_t.extend([now] * (len(self.entry_gap) - n_gap))


def split(stream: RequestStream, n: int, warmup_s: float) -> list[Window]:
    """``n`` windows of equal length over the arrival span of ``stream`` (see the module docstring).

    Raises:
        InputError: ``n`` outside 1..MAX_WINDOWS, a negative warm-up, or more windows than requests.
    """
    if not 1 <= n <= MAX_WINDOWS:
        raise InputError(f"--windows must be 1..{MAX_WINDOWS}, got {n}", fix="pass e.g. --windows 4")
    if not (warmup_s >= 0 and np.isfinite(warmup_s)):
        raise InputError(f"--warmup must be >= 0, got {warmup_s}", fix="pass e.g. --warmup 60s")
    if n > stream.n:
        raise InputError(f"--windows {n} is more than the {stream.n} requests", fix="pass fewer windows")
    arr = stream.arrival_s
    t0, t1 = float(arr[0]), float(arr[-1])
    edges = [t0 + (t1 - t0) * k / n for k in range(n + 1)]
    cuts = [0] + [int(np.searchsorted(arr, edges[k], side="left")) for k in range(1, n)] + [stream.n]
    out = []
    for k in range(n):
        lo, hi = edges[k], edges[k + 1]
        run_from = int(np.searchsorted(arr, lo - warmup_s, side="left")) if k else 0
        out.append(Window(k, lo if k else -np.inf, hi if k < n - 1 else np.inf, run_from, cuts[k], cuts[k + 1]))
    return out


def _slice(stream: RequestStream, a: int, b: int) -> RequestStream:
    k = slice(a, b)
    return replace(stream, arrival_s=stream.arrival_s[k], prompt_tokens=stream.prompt_tokens[k],
                   output_tokens=stream.output_tokens[k], class_id=stream.class_id[k],
                   ttft_slo_s=stream.ttft_slo_s[k], tpot_slo_s=stream.tpot_slo_s[k],
                   prefix_blocks=None if stream.prefix_blocks is None else
                   stream.prefix_blocks.take(np.arange(a, b)))  # fmt: skip


def router_states(dep: Deployment, stream: RequestStream, config: SimConfig, at: list[int]) -> list[RouterState]:
    """The router's state before request ``i`` of one long run, for each ``i`` in ``at`` (sorted): the
    ``round-robin`` and ``random`` routers pick without looking at the load, so replaying their picks over the
    earlier requests (those within the context window, as the engine routes) gives the exact state."""
    router = Router(dep.routing_table(), config.router, config.seed)
    limit = int(dep.arch.spec.max_position_embeddings)
    prompt = stream.prompt_tokens.tolist()
    states, i = [], 0
    for stop in at:
        for j in range(i, stop):
            if prompt[j] <= limit:
                router.pick(prompt[j])
        i = max(i, stop)
        states.append(router.snapshot())
    return states


def run_window(
    plan: Plan, stream: RequestStream, window: Window, policy: str, cascade: CascadeSettings, config: SimConfig,
    router_state: RouterState | None = None, predictor: OutputPredictor | None = None, catalog: Catalog | None = None,
) -> WindowResult:  # fmt: skip
    """Simulate ``stream`` (the window's requests, warm-up first, SLOs set) from ``router_state`` and keep what
    ``window`` owns; ``predictor``: the whole run's output predictor (:func:`simulate_windowed` passes the sizing
    data's, else the whole stream's: :func:`hetplan.sim.run.default_predictor`; None here: the window's own);
    ``catalog``: whose fitted curves time the steps (None: the shipped catalogs)."""
    start = time.perf_counter()
    dep = deployment_from_plan(plan, catalog)
    sim = _TimedSimulator(dep, stream, get_scheduler(policy, cascade), config, predictor=predictor)
    if router_state is not None:
        sim.router.restore(router_state)
    res = sim.run()
    warm = window.own_from - window.run_from

    def owned(times: array[float]) -> np.ndarray:
        t = np.asarray(times, dtype=float)
        return (t >= window.lo_s) & (t < window.hi_s)

    keep = owned(sim.iter_t)
    busy = np.bincount(np.asarray(sim.iter_inst, dtype=np.int64)[keep],
                       weights=np.asarray(sim.iter_dur, dtype=float)[keep], minlength=len(dep.instances))  # fmt: skip
    steps, gaps = owned(sim.step_t), owned(sim.gap_t)
    return WindowResult(
        window.index, res.first_token_s[warm:], res.done_s[warm:], res.dropped[warm:], res.over_context[warm:],
        res.first_token_s[:warm] - stream.arrival_s[:warm], res.step_s[steps], res.step_weight[steps],
        res.entry_gap_s[gaps], busy, int(keep.sum()), dict(res.counters), res.end_s, res.cut_off,
        time.perf_counter() - start,
    )  # fmt: skip


def _warmup_check(stream: RequestStream, windows: list[Window], results: list[WindowResult], warmup_s: float,
                  first: np.ndarray) -> tuple[list[dict[str, Any]], list[str]]:  # fmt: skip
    """Per window, the late warm-up requests' mean TTFT as warm-up and as owned; warnings where they differ."""
    rows, warnings = [], []
    for w, r in zip(windows, results, strict=True):
        a = int(np.searchsorted(stream.arrival_s, w.lo_s - warmup_s / 2, side="left")) if w.index else w.own_from
        if a >= w.own_from:
            continue
        cold = r.warmup_ttft_s[a - w.run_from :]
        ref = first[a : w.own_from] - stream.arrival_s[a : w.own_from]
        ok = np.isfinite(cold) & np.isfinite(ref)
        if not ok.any():
            continue
        c, o = float(cold[ok].mean()), float(ref[ok].mean())
        rows.append({"window": w.index, "requests": int(ok.sum()), "warmup_ttft_mean_s": rnd(c, 5),
                     "owned_ttft_mean_s": rnd(o, 5)})  # fmt: skip
        if abs(c - o) > max(WARMUP_MISMATCH[0] * abs(o), WARMUP_MISMATCH[1]):
            warnings.append(
                f"window {w.index}: the warm-up did not reach the state of one long run (mean TTFT of its last "
                f"{int(ok.sum())} warm-up requests {c:.3g} s, {o:.3g} s in the window before); raise --warmup "
                f"(now {warmup_s:g} s) or use fewer windows"
            )
    return rows, warnings


def simulate_windowed(req: SimRequest, windows: int, warmup_s: float, executor: Any = None) -> dict[str, Any]:
    """Simulate ``req`` as ``windows`` time windows with ``warmup_s`` seconds of warm-up, run as parallel tasks on
    ``executor`` (a :class:`hetplan.executors.Executor`; None: one after another here), and merge them; returns
    the metrics document of :func:`hetplan.sim.run.simulation` plus a ``windowed`` block (windows, warm-up,
    per-window requests and seconds, the warm-up check).

    Raises:
        InputError: bad settings (see :func:`split` and :func:`hetplan.sim.run.prepare_run`).
    """
    from hetplan.executors import LocalExecutor

    dep, stream = prepare_run(req)
    wins = split(stream, windows, warmup_s)
    cascade = req.cascade or plan_cascade(req.plan)
    get_scheduler(req.policy, cascade)  # refuse an unknown policy before starting any task
    ex = executor or LocalExecutor(1)
    results: dict[int, WindowResult] = {}
    failures: list[str] = []
    states: list[RouterState | None] = [None] * len(wins)
    if req.config.router in ("round-robin", "random"):  # jsq follows the load: each window starts it afresh
        states = list(router_states(dep, stream, req.config, [w.run_from for w in wins]))
    # one long run's predictor in every window: the sizing data's (req.predictor), else the whole stream's
    predictor, learnt_from = default_predictor(req, stream)
    tasks = [(req.plan, _slice(stream, w.run_from, w.own_to), w, req.policy, cascade, req.config, st, predictor,
              req.catalog) for w, st in zip(wins, states, strict=True)]  # fmt: skip
    ex.run(run_window, tasks, lambda i, r: results.__setitem__(i, r),
           lambda i, exc: failures.append(f"window {i}: {type(exc).__name__}: {exc}"))  # fmt: skip
    if failures:
        raise InputError("windowed simulation failed", "; ".join(failures[:3]), "run without --windows to see why")
    ordered = [results[i] for i in range(len(wins))]
    n = stream.n
    first, done = np.full(n, np.inf), np.full(n, np.inf)
    dropped, over = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    for w, r in zip(wins, ordered, strict=True):
        first[w.own_from : w.own_to], done[w.own_from : w.own_to] = r.first_token_s, r.done_s
        dropped[w.own_from : w.own_to], over[w.own_from : w.own_to] = r.dropped, r.over_context
    counters: dict[str, float] = {}
    for r in ordered:
        for key, value in r.counters.items():
            counters[key] = counters.get(key, 0.0) + value
    counters["iterations"] = float(sum(r.iterations for r in ordered))
    merged = SimResult(
        first, done, dropped, np.concatenate([r.step_s for r in ordered]),
        np.concatenate([r.step_weight for r in ordered]), np.concatenate([r.entry_gap_s for r in ordered]),
        np.sum([r.busy_s for r in ordered], axis=0), max(r.end_s for r in ordered), counters,
        tuple(s.name for s in dep.instances), tuple(s.role for s in dep.instances), (), over,
        any(r.cut_off for r in ordered), req.config.drain_s, int(dep.arch.spec.max_position_embeddings),
    )  # fmt: skip
    metrics = measure(stream, merged, req.window_s).to_doc()
    check, warnings = _warmup_check(stream, wins, ordered, warmup_s, first)
    metrics["warnings"] = metrics["warnings"] + warnings
    head: dict[str, Any] = {
        "kind": "simulation", "policy": policy_label(req.policy), "router": req.config.router, "seed": req.config.seed,
        "chunked_prefill": req.config.chunked_prefill, "rate_scale": req.rate_scale, "trace": stream.source,
        "instances": len(dep.instances), "plan_strategy": req.plan.strategy,
        "plan_goodput_req_per_s": req.plan.goodput_req_per_s, "slo_percentile": req.plan.slo.percentile,
    }  # fmt: skip
    scheduler = get_scheduler(req.policy, cascade)
    if scheduler.settings():
        head[scheduler.name] = scheduler.settings()
        head["output_predictor"] = learnt_from
    tier = host_kv_run(req.config)
    if tier is not None:  # --host-kv, as simulate records it
        head["host_kv"] = tier.to_doc()
    windowed = {
        "windows": len(wins),
        "warmup_s": warmup_s,
        "executor": ex.describe(),
        "per_window": [
            {
                "window": w.index,
                "start_s": rnd(float(max(w.lo_s, stream.arrival_s[0])), 6),
                "requests": w.own_to - w.own_from,
                "warmup_requests": w.own_from - w.run_from,
                "wall_s": rnd(r.wall_s, 4),
            }
            for w, r in zip(wins, ordered, strict=True)
        ],  # fmt: skip
        "warmup_check": check,
        "counters_note": "iterations, ITL and utilisation: owned iterations only; other counters summed over the "
        "window runs, warm-ups included",
    }
    return head | metrics | {"windowed": windowed}


__all__ = ["MAX_WINDOWS", "Window", "WindowResult", "run_window", "simulate_windowed", "split"]
