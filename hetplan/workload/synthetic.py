"""Synthetic workloads: lognormal prompt/output lengths with Poisson arrivals, including Cauchy's three classes.

Source: the synthetic class parameters are hetplan's own reconstruction (the Cauchy paper names the classes but
does not publish their distributions).
"""

from __future__ import annotations

import math

import numpy as np

from hetplan.errors import InputError
from hetplan.workload.model import MAX_TOKENS, Workload, make_workload

# name -> (median prompt tokens, median output tokens); lognormal sigma 0.6 for both.
SYNTHETIC_CLASSES: dict[str, tuple[float, float]] = {
    "long-input-short-output": (4096.0, 64.0),
    "balanced": (1024.0, 512.0),
    "short-input-long-output": (256.0, 1024.0),
}
MAX_SYNTHETIC_REQUESTS = 1_000_000


def synthetic_workload(
    kind: str = "balanced",
    rate_per_s: float = 1.0,
    requests: int = 2000,
    seed: int = 0,
    prompt_tokens_median: float | None = None,
    output_tokens_median: float | None = None,
    sigma: float = 0.6,
) -> Workload:
    """Lognormal prompt/output lengths and Poisson arrivals at ``rate_per_s``.

    ``kind`` is one of :data:`SYNTHETIC_CLASSES` (or ``custom`` with both medians given).

    Raises:
        InputError: unknown kind, or non-positive parameters.
    """
    if kind in SYNTHETIC_CLASSES:
        p_med, o_med = SYNTHETIC_CLASSES[kind]
    elif kind == "custom":
        p_med, o_med = 0.0, 0.0
    else:
        raise InputError(
            f"unknown synthetic workload class {kind!r}",
            f"known: {', '.join(SYNTHETIC_CLASSES)}, custom",
            "pick one of the known classes",
        )
    p_med = prompt_tokens_median or p_med
    o_med = output_tokens_median or o_med
    if not (0 < p_med <= MAX_TOKENS and 0 < o_med <= MAX_TOKENS and 0 < rate_per_s < math.inf):
        raise InputError(
            "synthetic workload needs finite positive medians and rate",
            f"got prompt {p_med}, output {o_med}, rate {rate_per_s} req/s",
            "set prompt_tokens_median, output_tokens_median and rate_per_s > 0",
        )
    if not (0 < requests <= MAX_SYNTHETIC_REQUESTS and 0 < sigma <= 3 and seed >= 0):
        raise InputError(
            "synthetic workload: requests, sigma or seed out of range",
            f"requests {requests} (1..{MAX_SYNTHETIC_REQUESTS:,}), sigma {sigma} (0..3], seed {seed} (>= 0)",
            "use values in those ranges",
        )
    rng = np.random.default_rng(seed)
    prompt = np.clip(np.round(rng.lognormal(np.log(p_med), sigma, requests)), 1, MAX_TOKENS).astype(np.int64)
    output = np.clip(np.round(rng.lognormal(np.log(o_med), sigma, requests)), 1, MAX_TOKENS).astype(np.int64)
    times = np.cumsum(rng.exponential(1.0 / rate_per_s, requests))
    source = f"synthetic {kind} (median prompt {p_med:g}, output {o_med:g}, sigma {sigma}, seed {seed})"
    wl = make_workload(kind, source, "", times, prompt, output, None)
    return Workload(wl.name, wl.source, "", rate_per_s, wl.duration_s, wl.prompt_tokens, wl.output_tokens, wl.arrival_s)


__all__ = ["MAX_SYNTHETIC_REQUESTS", "SYNTHETIC_CLASSES", "synthetic_workload"]
