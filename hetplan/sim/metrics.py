"""Metrics of a simulation run (DESIGN §1 terms).

- TTFT = first token − arrival; TPOT = (completion − first token)/(n − 1), only for n > 1; E2E = completion −
  arrival; ITL = the gap between consecutive tokens, pooled over all tokens (token-weighted). Percentiles use
  numpy's linear estimator; ITL's is computed exactly as ``np.percentile`` on the pooled samples would be, without
  materialising them (:func:`weighted_percentile`).
- SLO attainment: the share of requests that met the TTFT SLO, the TPOT SLO, and both (joint), each request
  against its own class's SLOs; dropped and unfinished requests are misses. Per class as well.
- Goodput: requests per second that met both SLOs, over the span of the arrivals.
- Jain index over classes of the per-class joint attainment: ``(Σx)² / (n·Σx²)`` (1 fair, 1/n worst; ``None``
  when every class is at 0).
- Utilisation: share of the run each instance spent in iterations; time series per arrival window.

Source: DESIGN §1; hetplan's own implementation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetplan.planning import rnd
from hetplan.sim.result import SimResult
from hetplan.sim.trace import RequestStream

PERCENTILES = (50.0, 90.0, 99.0)


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


def _stats(x: np.ndarray) -> dict[str, float | None]:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return {"mean": None, **{f"p{q:g}": None for q in PERCENTILES}}
    out: dict[str, float | None] = {"mean": rnd(float(x.mean()), 5)}
    for q, v in zip(PERCENTILES, np.percentile(x, PERCENTILES), strict=True):
        out[f"p{q:g}"] = rnd(float(v), 5)
    return out


def request_outcomes(stream: RequestStream, res: SimResult) -> dict[str, np.ndarray]:
    """Per-request arrays: ttft_s, tpot_s (NaN for n = 1), e2e_s, and boolean ok_ttft, ok_tpot, ok (joint)."""
    a = stream.arrival_s
    n_out = stream.output_tokens
    ttft = res.first_token_s - a
    e2e = res.done_s - a
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n_out > 1, (res.done_s - res.first_token_s) / np.maximum(n_out - 1, 1), np.nan)
    finished = np.isfinite(res.done_s) & ~res.dropped
    ok_ttft = np.isfinite(ttft) & (ttft <= stream.ttft_slo_s + 1e-12) & ~res.dropped
    ok_tpot = finished & ((n_out <= 1) | (tpot <= stream.tpot_slo_s + 1e-12))
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "ok_ttft": ok_ttft, "ok_tpot": ok_tpot,
            "ok": ok_ttft & ok_tpot & finished, "finished": finished}  # fmt: skip


def summarize(stream: RequestStream, res: SimResult, window_s: float = 60.0) -> dict[str, Any]:
    """The metrics document of one run (JSON-friendly, rounded, deterministic).

    Args:
        stream: the (scaled) stream that was simulated. res: the run's raw result.
        window_s: width of the time-series windows, seconds (by arrival time).
    """
    o = request_outcomes(stream, res)
    n = stream.n
    span = stream.duration_s
    itl_values = np.concatenate([res.step_s, res.entry_gap_s])
    itl_weights = np.concatenate([res.step_weight, np.ones(res.entry_gap_s.size, dtype=np.int64)])
    itl: dict[str, float | None] = {}
    if itl_weights.sum() > 0:
        itl["mean"] = rnd(float((itl_values * itl_weights).sum() / itl_weights.sum()), 5)
        for q in PERCENTILES:
            itl[f"p{q:g}"] = rnd(weighted_percentile(itl_values, itl_weights, q), 5)
    else:
        itl = _stats(np.array([]))
    classes = []
    for c, name in enumerate(stream.class_names):
        m = stream.class_id == c
        k = int(m.sum())
        classes.append(
            {
                "class": name,
                "requests": k,
                "ttft_slo_s": rnd(float(stream.ttft_slo_s[m][0]), 5) if k else None,
                "tpot_slo_s": rnd(float(stream.tpot_slo_s[m][0]), 5) if k else None,
                "attainment": rnd(float(o["ok"][m].mean()), 5) if k else None,
                "ttft_attainment": rnd(float(o["ok_ttft"][m].mean()), 5) if k else None,
                "tpot_attainment": rnd(float(o["ok_tpot"][m].mean()), 5) if k else None,
                "goodput_req_per_s": rnd(float(o["ok"][m].sum()) / span, 5),
                "ttft_s": _stats(o["ttft_s"][m]),
                "tpot_s": _stats(o["tpot_s"][m]),
            }
        )
    end = max(res.end_s, 1e-9)
    util = np.minimum(res.busy_s / end, 1.0)
    roles = sorted(set(res.instance_roles))
    windows = []
    if n:
        edges = np.arange(0.0, float(stream.arrival_s[-1]) + window_s, window_s)
        idx = np.minimum((stream.arrival_s // window_s).astype(int), len(edges) - 1)
        for w in range(len(edges)):
            m = idx == w
            k = int(m.sum())
            if not k:
                continue
            ttft_w = o["ttft_s"][m]
            ttft_w = ttft_w[np.isfinite(ttft_w)]
            windows.append(
                {
                    "start_s": rnd(float(edges[w]), 6),
                    "requests": k,
                    "arrival_rate_per_s": rnd(k / window_s, 5),
                    "attainment": rnd(float(o["ok"][m].mean()), 5),
                    "goodput_req_per_s": rnd(float(o["ok"][m].sum()) / window_s, 5),
                    "ttft_p90_s": rnd(float(np.percentile(ttft_w, 90)), 5) if ttft_w.size else None,
                }
            )
    att = [float(c["attainment"]) for c in classes if isinstance(c["attainment"], float)]
    jain = jain_index(att)
    return {
        "requests": n,
        "finished": int(o["finished"].sum()),
        "dropped": int(res.dropped.sum()),
        "duration_s": rnd(span, 6),
        "arrival_rate_per_s": rnd(n / span, 5),
        "attainment": {
            "ttft": rnd(float(o["ok_ttft"].mean()), 5),
            "tpot": rnd(float(o["ok_tpot"].mean()), 5),
            "joint": rnd(float(o["ok"].mean()), 5),
        },
        "goodput_req_per_s": rnd(float(o["ok"].sum()) / span, 5),
        "jain_index": None if jain is None else rnd(jain, 5),
        "ttft_s": _stats(o["ttft_s"]),
        "tpot_s": _stats(o["tpot_s"]),
        "itl_s": itl,
        "e2e_s": _stats(o["e2e_s"]),
        "classes": classes,
        "utilization": {
            "by_role": {r: rnd(float(util[[x == r for x in res.instance_roles]].mean()), 4) for r in roles},
            "by_instance": {name: rnd(float(u), 4) for name, u in zip(res.instance_names, util, strict=True)},
        },
        "counters": {k: rnd(float(v), 8) for k, v in sorted(res.counters.items())},
        "percentile_estimator": "numpy linear",
        "window_s": window_s,
        "time_series": windows,
    }


__all__ = ["jain_index", "request_outcomes", "summarize", "weighted_percentile"]
