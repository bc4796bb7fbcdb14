"""Metrics of a simulation run (DESIGN §1 terms).

- TTFT = first token − arrival; TPOT = (completion − first token)/(n − 1), only for n > 1; E2E = completion −
  arrival; ITL = the gap between consecutive tokens, pooled over all tokens (token-weighted). Percentiles use
  numpy's linear estimator; ITL's is computed exactly as ``np.percentile`` on the pooled samples would be, without
  materialising them (:func:`weighted_percentile`).
- SLO attainment: the share of requests that met the TTFT SLO, the TPOT SLO, and both (joint), each request
  against its own class's SLOs; dropped and unfinished requests are misses. Per class as well. TPOT is defined
  only for requests served ≥ 2 output tokens: TPOT attainment is the share of those (``tpot_ineligible`` counts
  the others), and a single-token request's joint outcome is its TTFT's.
- Goodput: requests per second that met every SLO, over the *serving span*: from the first arrival to the later of
  the last arrival and the last completion (so an overloaded run that takes longer to serve than the trace took
  to arrive is not credited with the arrival rate). A span of 0 (nothing finished after a single arrival) gives
  goodput 0 with ``goodput_note`` saying why; nothing is ever divided by ~0.
- Counts: ``finished``, ``dropped`` (KV too small for the request), ``dropped_over_context`` (prompt longer than the
  model's context window: refused), ``truncated_at_context`` (output cut at the window; served) and
  ``unfinished`` (still in flight at the drain cut-off; misses); the rule is :mod:`hetplan.workload.context`.
- Jain index over classes of the per-class joint attainment: ``(Σx)² / (n·Σx²)`` (1 fair, 1/n worst; ``None``
  when every class is at 0).
- Utilisation: share of the run each instance spent in iterations; time series per arrival window (rates divided
  by the covered part of each window, so a partial last window is not diluted; at most ``MAX_WINDOWS`` windows,
  wider ones are used automatically otherwise and a warning says so).

Source: DESIGN §1; hetplan's own implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hetplan.sim.result import (
    Attainment,
    ClassMetrics,
    LatencyStats,
    PrefixCacheStats,
    PrefixTierStats,
    RunMetrics,
    SimResult,
    TimeWindow,
    Utilization,
)
from hetplan.units import rnd
from hetplan.workload.context import context_note
from hetplan.workload.model import RequestStream

PERCENTILES = (50.0, 90.0, 99.0)
MAX_WINDOWS = 10_000
GOODPUT_DEFINITION = "requests meeting every SLO / (later of last arrival and last completion - first arrival)"


def weighted_percentile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """``np.percentile(np.repeat(values, weights), q)`` (linear estimator) without building the repeat.

    Args:
        values: shape (k,), samples. weights: shape (k,), non-negative integer counts. q: percentile 0..100.

    Returns:
        The percentile, or NaN when the weights sum to 0.
    """
    w = np.asarray(weights, dtype=np.int64)
    keep = w > 0
    v = np.asarray(values, dtype=float)[keep]
    w = w[keep]
    total = int(w.sum())
    if total == 0:
        return float("nan")
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    cum = np.cumsum(w)
    h = (total - 1) * q / 100.0
    lo, hi = int(np.floor(h)), int(np.ceil(h))
    v_lo = v[int(np.searchsorted(cum, lo, side="right"))]
    v_hi = v[int(np.searchsorted(cum, hi, side="right"))]
    return float(v_lo + (h - lo) * (v_hi - v_lo))


def jain_index(shares: list[float] | np.ndarray) -> float | None:
    """Jain's fairness index ``(Σx)² / (n·Σx²)`` of non-negative shares; None when all are 0 or none given."""
    x = np.asarray(shares, dtype=float)
    if x.size == 0 or not np.any(x > 0):
        return None
    return float(x.sum() ** 2 / (x.size * (x * x).sum()))


def _stats(x: np.ndarray) -> LatencyStats:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return LatencyStats(mean=None, p50=None, p90=None, p99=None)
    p50, p90, p99 = (rnd(float(v), 5) for v in np.percentile(x, PERCENTILES))
    return LatencyStats(mean=rnd(float(x.mean()), 5), p50=p50, p90=p90, p99=p99)


@dataclass(frozen=True)
class Outcomes:
    """Per-request outcomes of a run, each shape (n,): ttft_s, tpot_s (NaN for n = 1), e2e_s; booleans ok_ttft,
    ok_tpot (False when not eligible), ok (joint), finished, tpot_eligible (n ≥ 2 output tokens served);
    output_tokens (served: cut at the context window) and arrival_s (as the run used them)."""

    ttft_s: np.ndarray
    tpot_s: np.ndarray
    e2e_s: np.ndarray
    ok_ttft: np.ndarray
    ok_tpot: np.ndarray
    ok: np.ndarray
    finished: np.ndarray
    tpot_eligible: np.ndarray
    output_tokens: np.ndarray
    arrival_s: np.ndarray


def outcomes(stream: RequestStream, res: SimResult) -> Outcomes:
    """The per-request :class:`Outcomes` of ``res`` against ``stream``'s SLOs (each request its own class's)."""
    a = res.arrival_s if res.arrival_s.shape == stream.arrival_s.shape else stream.arrival_s
    n_out = res.output_tokens if res.output_tokens.shape == stream.output_tokens.shape else stream.output_tokens
    ttft = res.first_token_s - a
    e2e = res.done_s - a
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n_out > 1, (res.done_s - res.first_token_s) / np.maximum(n_out - 1, 1), np.nan)
    finished = np.isfinite(res.done_s) & ~res.dropped
    eligible = n_out > 1
    ok_ttft = np.isfinite(ttft) & (ttft <= stream.ttft_slo_s + 1e-12) & ~res.dropped
    ok_tpot = finished & eligible & (tpot <= stream.tpot_slo_s + 1e-12)
    return Outcomes(ttft_s=ttft, tpot_s=tpot, e2e_s=e2e, ok_ttft=ok_ttft, ok_tpot=ok_tpot,
                    ok=ok_ttft & finished & (ok_tpot | ~eligible), finished=finished, tpot_eligible=eligible,
                    output_tokens=n_out, arrival_s=a)  # fmt: skip


def _share(ok: np.ndarray, among: np.ndarray) -> float | None:
    """Share of ``among`` that is ``ok`` (None when ``among`` is empty)."""
    k = int(among.sum())
    return rnd(float(ok[among].sum()) / k, 5) if k else None


def _itl(res: SimResult) -> LatencyStats:
    """Token-weighted ITL statistics: iteration steps weighted by the tokens they produced, plus entry gaps."""
    itl_values = np.concatenate([res.step_s, res.entry_gap_s])
    itl_weights = np.concatenate([res.step_weight, np.ones(res.entry_gap_s.size, dtype=np.int64)])
    if itl_weights.sum() <= 0:
        return _stats(np.array([]))
    p50, p90, p99 = (rnd(weighted_percentile(itl_values, itl_weights, q), 5) for q in PERCENTILES)
    mean = rnd(float((itl_values * itl_weights).sum() / itl_weights.sum()), 5)
    return LatencyStats(mean=mean, p50=p50, p90=p90, p99=p99)


def _classes(stream: RequestStream, o: Outcomes, per_s: Callable[[int], float]) -> list[ClassMetrics]:
    """Per-class counts, SLOs, attainment and latencies."""
    classes = []
    for c, name in enumerate(stream.class_names):
        m = stream.class_id == c
        k = int(m.sum())
        classes.append(
            ClassMetrics(
                name=name,
                requests=k,
                ttft_slo_s=rnd(float(stream.ttft_slo_s[m][0]), 5) if k else None,
                tpot_slo_s=rnd(float(stream.tpot_slo_s[m][0]), 5) if k else None,
                attainment=rnd(float(o.ok[m].mean()), 5) if k else None,
                ttft_attainment=rnd(float(o.ok_ttft[m].mean()), 5) if k else None,
                tpot_attainment=_share(o.ok_tpot, m & o.tpot_eligible),
                goodput_req_per_s=rnd(per_s(int(o.ok[m].sum())), 5),
                ttft_s=_stats(o.ttft_s[m]),
                tpot_s=_stats(o.tpot_s[m]),
            )
        )
    return classes


def _windows(o: Outcomes, window_s: float, warnings: list[str]) -> tuple[float, list[TimeWindow]]:
    """The time series by arrival window (only windows holding arrivals) and the window width used."""
    arrivals = o.arrival_s
    if not arrivals.size:
        return window_s, []
    first_arrival, last_arrival = float(arrivals.min()), float(arrivals.max())
    arrival_span = last_arrival - first_arrival
    if arrival_span / window_s > MAX_WINDOWS:
        wider = float(np.ceil(arrival_span / MAX_WINDOWS))
        warnings.append(
            f"--window {window_s:g} s gives more than {MAX_WINDOWS:,} windows over {arrival_span:.6g} s of "
            f"arrivals; using {wider:g} s windows"
        )
        window_s = wider
    idx = ((arrivals - first_arrival) // window_s).astype(np.int64)
    windows = []
    for w in np.unique(idx).tolist():  # only windows holding arrivals: idle time costs nothing
        m = idx == w
        k = int(m.sum())
        start = first_arrival + w * window_s
        # the covered part of the window: a partial last window ends at the last arrival
        covered = min(window_s, last_arrival - start)
        width = covered if covered > 0 else window_s
        ttft_w = o.ttft_s[m]
        ttft_w = ttft_w[np.isfinite(ttft_w)]
        windows.append(
            TimeWindow(
                start_s=rnd(float(start), 6),
                width_s=rnd(float(width), 6),
                requests=k,
                arrival_rate_per_s=rnd(k / width, 5),
                attainment=rnd(float(o.ok[m].mean()), 5),
                goodput_req_per_s=rnd(float(o.ok[m].sum()) / width, 5),
                ttft_p90_s=rnd(float(np.percentile(ttft_w, 90)), 5) if ttft_w.size else None,
            )
        )
    return window_s, windows


def measure(stream: RequestStream, res: SimResult, window_s: float = 60.0) -> RunMetrics:
    """The typed metrics of one run (rounded, deterministic).

    Args:
        stream: the (scaled) stream that was simulated. res: the run's raw result.
        window_s: width of the time-series windows, seconds (by arrival time).
    """
    o = outcomes(stream, res)
    n = stream.n
    warnings: list[str] = []
    first_arrival = float(o.arrival_s.min()) if n else 0.0
    last_arrival = float(o.arrival_s.max()) if n else 0.0
    arrival_span = last_arrival - first_arrival
    done = res.done_s[o.finished]
    serve_end = max(last_arrival, float(done.max()) if done.size else last_arrival)
    serve_span = serve_end - first_arrival
    goodput_note = None
    if serve_span <= 0:
        goodput_note = "serving span is 0 (one arrival and nothing finished): goodput is 0"

    def per_s(count: int) -> float:
        return 0.0 if serve_span <= 0 else count / serve_span

    over_ctx = res.over_context
    unfinished = int((~o.finished & ~res.dropped).sum())
    if res.cut_off and unfinished:
        warnings.append(
            f"{unfinished} request{'s' if unfinished != 1 else ''} still unfinished at the drain cut-off "
            f"({res.drain_s:g} s after the last arrival); they count as misses (raise --drain to let them finish)"
        )
    n_over = int(over_ctx.sum())
    note = context_note(n_over, res.truncated, res.context_tokens, n)
    if note:
        warnings.append(note)
    itl = _itl(res)
    classes = _classes(stream, o, per_s)
    end = max(res.end_s, 1e-9)
    util = np.minimum(res.busy_s / end, 1.0)
    roles = sorted(set(res.instance_roles))
    window_s, windows = _windows(o, window_s, warnings)
    jain = jain_index([c.attainment for c in classes if isinstance(c.attainment, float)])
    return RunMetrics(
        requests=n,
        finished=int(o.finished.sum()),
        dropped=int((res.dropped & ~over_ctx).sum()),
        dropped_over_context=n_over,
        truncated_at_context=res.truncated,
        unfinished=unfinished,
        tpot_ineligible=int((~o.tpot_eligible).sum()),
        duration_s=rnd(arrival_span, 6),
        serving_span_s=rnd(serve_span, 6),
        arrival_rate_per_s=rnd(n / arrival_span, 5) if arrival_span > 0 else None,
        attainment=Attainment(
            ttft=rnd(float(o.ok_ttft.mean()), 5),
            tpot=_share(o.ok_tpot, o.tpot_eligible),
            joint=rnd(float(o.ok.mean()), 5),
        ),
        goodput_req_per_s=rnd(per_s(int(o.ok.sum())), 5),
        goodput_definition=GOODPUT_DEFINITION,
        goodput_note=goodput_note,
        jain_index=None if jain is None else rnd(jain, 5),
        ttft_s=_stats(o.ttft_s),
        tpot_s=_stats(o.tpot_s),
        itl_s=itl,
        e2e_s=_stats(o.e2e_s),
        classes=classes,
        utilization=Utilization(
            by_role={r: rnd(float(util[[x == r for x in res.instance_roles]].mean()), 4) for r in roles},
            by_instance={name: rnd(float(u), 4) for name, u in zip(res.instance_names, util, strict=True)},
        ),
        counters={k: rnd(float(v), 8) for k, v in sorted(res.counters.items())},
        prefix_cache=_prefix_cache(res.counters),
        percentile_estimator="numpy linear",
        window_s=window_s,
        time_series=windows,
        drain_s=res.drain_s,
        cut_off_reached=res.cut_off,
        warnings=warnings,
    )


PREFIX_COUNTERS = ("prefix_hit_blocks", "prefix_miss_blocks", "prefix_evicted_blocks", "prefix_hit_tokens",
                   "prefix_lookup_tokens")  # fmt: skip
"""The counters :mod:`hetplan.sim.prefix` adds when prefix caching is on."""


def _prefix_cache(counters: dict[str, float]) -> PrefixCacheStats | None:
    """The prefix-cache totals when the run had prefix caching (:mod:`hetplan.sim.prefix`), else None: hits,
    misses and evictions in blocks, the reused and looked-up prompt tokens and their ratio; with a host tier also
    each tier's blocks, the tokens restored from it and the restore time."""
    if PREFIX_COUNTERS[0] not in counters:
        return None
    hit_blocks, miss_blocks, evicted_blocks, hit, looked = (counters[k] for k in PREFIX_COUNTERS)
    return PrefixCacheStats(
        hit_blocks=int(hit_blocks),
        miss_blocks=int(miss_blocks),
        evicted_blocks=int(evicted_blocks),
        hit_tokens=int(hit),
        lookup_tokens=int(looked),
        token_hit_rate=rnd(hit / looked, 5) if looked else 0.0,
        **(
            {
                "dram": _tier(counters, "dram"),
                "ssd": _tier(counters, "ssd"),
                "host_hit_tokens": int(counters["prefix_host_hit_tokens"]),
                "restore_s": rnd(counters["prefix_restore_s"], 6),
            }
            if "prefix_dram_hit_blocks" in counters
            else {}
        ),
    )


def _tier(counters: dict[str, float], tier: str) -> PrefixTierStats:
    return PrefixTierStats(**{k: int(counters[f"prefix_{tier}_{k}_blocks"]) for k in ("hit", "miss", "evicted")})


__all__ = [
    "GOODPUT_DEFINITION",
    "MAX_WINDOWS",
    "Outcomes",
    "jain_index",
    "measure",
    "outcomes",
    "weighted_percentile",
]
