"""Workload data: the planner's :class:`Workload` (rate and length samples) and the simulator's
:class:`RequestStream` (requests in arrival order, with classes and SLOs). No file is read here: the trace reader
is :mod:`hetplan.workload.readers`, synthetic distributions are in :mod:`hetplan.workload.synthetic`.

A request's class (in a stream) is the trace it came from or a CSV column's value; each class may carry its own
TTFT/TPOT SLOs (:class:`ClassSlo`). ``RequestStream.scaled(X)`` compresses the arrival times by X (X = 2 doubles
the arrival rate and keeps the burst pattern).

Source: hetplan's own reconstruction (the mixed conversation + code stream follows CASCADE's evaluation set-up).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from hetplan.errors import InputError
from hetplan.input_checks import MAX_NUMBER, MAX_SPAN_S
from hetplan.workload.prefix import BlockHashes

MAX_TOKENS = 10_000_000


@dataclass(frozen=True, eq=False)
class Workload:
    """Arrival rate and length samples of a workload.

    Attributes:
        name: label for reports.
        source: file path or generator description.
        attribution: citation to keep with any shipped sample of a public trace ("" for synthetic).
        arrival_rate_per_s: mean arrival rate (requests / duration), req/s; None for length-only data.
        duration_s: span of the timestamps, seconds (None when unknown).
        prompt_tokens: shape (n,), int, prompt length per request.
        output_tokens: shape (n,), int >= 1, output length per request.
        arrival_s: shape (n,), seconds since the first request, when the source has timestamps (else None).
        clock_start_s: the first request's date-time as seconds since the epoch, for traces with absolute
            timestamps (Azure CSV; else None): the simulator keeps the real offsets between such traces.
        over_context: set on a workload as the engine serves it (:func:`hetplan.workload.context.served_workload`)
            when requests were refused or outputs cut at the model's window: ``requests_total`` (before),
            ``refused``, ``truncated``, ``window_tokens`` and ``arrival_rate_per_s`` (req/s of the whole trace,
            refused requests included); None otherwise.
        prefix_blocks: each request's prefix block ids (a Mooncake trace's ``hash_ids``,
            :mod:`hetplan.workload.prefix`), in the trace's order; None when the trace has none.
        class_labels: shape (n,), str, each request's class name when the scenario declares ``classes``
            (:func:`hetplan.workload.classes.assign_classes`); None: one class, the workload's name.
    """

    name: str
    source: str
    attribution: str
    arrival_rate_per_s: float | None
    duration_s: float | None
    prompt_tokens: np.ndarray = field(repr=False)
    output_tokens: np.ndarray = field(repr=False)
    arrival_s: np.ndarray | None = field(default=None, repr=False)
    clock_start_s: float | None = field(default=None, repr=False)
    over_context: dict[str, Any] | None = field(default=None, repr=False)
    prefix_blocks: BlockHashes | None = field(default=None, repr=False)
    class_labels: np.ndarray | None = field(default=None, repr=False)

    def labels_at(self, rows: np.ndarray) -> np.ndarray | None:
        """The class labels of ``rows`` (an index or boolean mask), None when the workload has no classes."""
        return None if self.class_labels is None else self.class_labels[rows]

    @property
    def n_requests(self) -> int:
        """Number of requests in the workload."""
        return int(self.prompt_tokens.shape[0])

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly summary (rounded, deterministic)."""
        p, o = self.prompt_tokens, self.output_tokens
        return {
            "name": self.name,
            "source": self.source,
            "attribution": self.attribution,
            "requests": self.n_requests,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
            "arrival_rate_per_s": None if self.arrival_rate_per_s is None else round(self.arrival_rate_per_s, 4),
            "prompt_tokens_mean": round(float(p.mean()), 2),
            "prompt_tokens_p50": round(float(np.percentile(p, 50)), 2),
            "prompt_tokens_p90": round(float(np.percentile(p, 90)), 2),
            "output_tokens_mean": round(float(o.mean()), 2),
            "output_tokens_p50": round(float(np.percentile(o, 50)), 2),
            "output_tokens_p90": round(float(np.percentile(o, 90)), 2),
            # only when the model's window refused or cut requests: plans of other workloads stay as they were
            **({"over_context": dict(self.over_context)} if self.over_context else {}),
        }

    def sample(self, max_requests: int) -> tuple[np.ndarray, np.ndarray]:
        """Deterministic subsample (every k-th request after sorting by index) of at most ``max_requests``."""
        idx = self.sample_index(max_requests)
        if idx is None:
            return self.prompt_tokens, self.output_tokens
        return self.prompt_tokens[idx], self.output_tokens[idx]

    def sample_index(self, max_requests: int) -> np.ndarray | None:
        """The request indices :meth:`sample` keeps, shape (max_requests,); None when it keeps every request."""
        n = self.n_requests
        if n <= max_requests:
            return None
        idx: np.ndarray = np.linspace(0, n - 1, max_requests).round().astype(int)
        return idx


def _tokens(values: Any, column: str, source: str, minimum: int) -> np.ndarray:
    """Validate a column of token counts: numeric, finite, integral, within [minimum, MAX_TOKENS].

    Raises:
        InputError: naming the first bad row (1-based data row) and column.
    """
    series = pd.Series(values)
    if series.map(lambda v: isinstance(v, bool) or (isinstance(v, int) and abs(v) > MAX_NUMBER)).any():
        # booleans are not counts; an int of hundreds of digits would overflow pandas' float conversion
        series = series.map(
            lambda v: float("nan") if isinstance(v, bool) or (isinstance(v, int) and abs(v) > MAX_NUMBER) else v
        )
    numbers = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(numbers) | (numbers != np.round(numbers)) | (numbers < minimum) | (numbers > MAX_TOKENS)
    if bad.any():
        row = int(np.nonzero(bad)[0][0])
        raise InputError(
            f"workload {source}: {column} in row {row + 1} is {values[row]!r}",
            f"{int(bad.sum())} row(s) have {column} that is not a whole number in [{minimum}, {MAX_TOKENS:,}]",
            "clean the trace: token counts are whole numbers, prompts have at least 1 token",
        )
    counts: np.ndarray = numbers.astype(np.int64)
    return counts


def make_workload(
    name: str,
    source: str,
    attribution: str,
    times_s: np.ndarray | None,
    prompt: Any,
    output: Any,
    rate_per_s: float | None,
    prompt_column: str = "prompt tokens",
    output_column: str = "output tokens",
    clock_start_s: float | None = None,
    prefix_blocks: BlockHashes | None = None,
) -> Workload:
    """A validated :class:`Workload` from parsed columns (``times_s``: arrival times in seconds, or None); the
    rate defaults to (requests − 1) / span of the timestamps; outputs of 0 tokens count as 1.

    Raises:
        InputError: no requests, a bad token count (naming ``prompt_column``/``output_column`` and the row) or
            non-finite timestamps.
    """
    if len(prompt) == 0:
        raise InputError(f"workload {source} has no requests", fix="pass a trace with at least one row")
    prompt_tokens = _tokens(np.asarray(prompt, dtype=object), prompt_column, source, 1)
    output_tokens = np.maximum(_tokens(np.asarray(output, dtype=object), output_column, source, 0), 1)
    duration = None
    if times_s is not None and times_s.size > 1:
        if not np.all(np.isfinite(times_s)):
            raise InputError(f"workload {source}: some timestamps are not finite numbers", fix="fix the timestamps")
        duration = float(times_s.max() - times_s.min())
        if duration > MAX_SPAN_S:
            raise InputError(
                f"timestamps of workload {source} span {duration / (365.25 * 86400):,.0f} years, more than the "
                "century hetplan accepts",
                "a trace covers hours to months; this is a date or unit error",
                "check the timestamps (Azure: date-times; Mooncake: milliseconds)",
            )
        if rate_per_s is None and duration > 0:
            rate_per_s = (times_s.size - 1) / duration
    arrival = None if times_s is None else np.asarray(times_s, dtype=float) - float(np.min(times_s))
    return Workload(
        name, source, attribution, rate_per_s, duration, prompt_tokens, output_tokens, arrival, clock_start_s,
        prefix_blocks=prefix_blocks,
    )  # fmt: skip


@dataclass(frozen=True)
class ClassSlo:
    """SLOs of one request class, seconds (``None``: the plan's SLO)."""

    ttft_s: float | None = None
    tpot_s: float | None = None


@dataclass(frozen=True, eq=False)
class RequestStream:
    """Requests sorted by arrival.

    Attributes:
        arrival_s: shape (n,), seconds from the first arrival, non-decreasing.
        prompt_tokens / output_tokens: shape (n,), int (output ≥ 1).
        class_id: shape (n,), int index into ``class_names``.
        class_names: one name per class, sorted.
        ttft_slo_s / tpot_slo_s: shape (n,), each request's SLOs, seconds.
        source: human-readable description of the files.
        prefix_blocks: each request's prefix block ids in stream order (:mod:`hetplan.workload.prefix`), or None
            (no prefix caching in the simulator).
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    class_id: np.ndarray
    class_names: tuple[str, ...]
    ttft_slo_s: np.ndarray
    tpot_slo_s: np.ndarray
    source: str
    prefix_blocks: BlockHashes | None = None

    @property
    def n(self) -> int:
        """Number of requests."""
        return int(self.arrival_s.shape[0])

    @property
    def duration_s(self) -> float:
        """Span of the arrivals, seconds (at least 1e-9)."""
        return max(float(self.arrival_s[-1] - self.arrival_s[0]) if self.n else 0.0, 1e-9)

    def with_slos(self, default_ttft_s: float, default_tpot_s: float, slos: dict[str, ClassSlo]) -> RequestStream:
        """A copy with per-request SLOs: each class's own, else the defaults.

        Raises:
            InputError: ``slos`` names a class that is not in the stream.
        """
        unknown = sorted(set(slos) - set(self.class_names))
        if unknown:
            raise InputError(
                f"SLOs given for unknown request classes {unknown}",
                f"the stream's classes are {list(self.class_names)}",
                "use one of those class names",
            )
        ttft = np.array([(slos.get(c) or ClassSlo()).ttft_s or default_ttft_s for c in self.class_names])
        tpot = np.array([(slos.get(c) or ClassSlo()).tpot_s or default_tpot_s for c in self.class_names])
        return RequestStream(
            self.arrival_s,
            self.prompt_tokens,
            self.output_tokens,
            self.class_id,
            self.class_names,
            ttft[self.class_id],
            tpot[self.class_id],
            self.source,
            self.prefix_blocks,
        )

    def scaled(self, rate_scale: float) -> RequestStream:
        """Arrivals compressed by ``rate_scale`` (> 0): the arrival rate times ``rate_scale``.

        Raises:
            InputError: ``rate_scale`` is not positive and finite.
        """
        if not (np.isfinite(rate_scale) and rate_scale > 0):
            raise InputError(f"--rate-scale must be a positive number, got {rate_scale}", fix="pass e.g. 1.5")
        return RequestStream(
            self.arrival_s / rate_scale,
            self.prompt_tokens,
            self.output_tokens,
            self.class_id,
            self.class_names,
            self.ttft_slo_s,
            self.tpot_slo_s,
            self.source,
            self.prefix_blocks,
        )

    def with_prefix_blocks(self, blocks: BlockHashes | None) -> RequestStream:
        """A copy with ``blocks`` as the requests' prefix block ids (stream order), or None for no prefix caching.

        Raises:
            InputError: ``blocks`` holds a different number of requests."""
        if blocks is not None and blocks.n != self.n:
            raise InputError(f"prefix blocks for {blocks.n} requests given to a stream of {self.n}", fix="report this")
        return RequestStream(
            self.arrival_s, self.prompt_tokens, self.output_tokens, self.class_id, self.class_names,
            self.ttft_slo_s, self.tpot_slo_s, self.source, blocks,
        )  # fmt: skip

    def head(self, max_requests: int) -> RequestStream:
        """The first ``max_requests`` requests."""
        k = slice(0, max_requests)
        return RequestStream(
            self.arrival_s[k],
            self.prompt_tokens[k],
            self.output_tokens[k],
            self.class_id[k],
            self.class_names,
            self.ttft_slo_s[k],
            self.tpot_slo_s[k],
            self.source,
            None if self.prefix_blocks is None else self.prefix_blocks.take(np.arange(min(max_requests, self.n))),
        )


def make_stream(
    arrival_s: np.ndarray | list[float],
    prompt_tokens: np.ndarray | list[int],
    output_tokens: np.ndarray | list[int],
    classes: list[str] | np.ndarray | None = None,
    ttft_slo_s: float = 2.0,
    tpot_slo_s: float = 0.1,
    source: str = "in memory",
    prefix_blocks: BlockHashes | None = None,
) -> RequestStream:
    """Build a stream from arrays (sorted by arrival, stable; ties keep the given order); ``prefix_blocks`` (in the
    given order) are reordered with the requests.

    Raises:
        InputError: arrays of different lengths, no requests, negative times or non-positive lengths.
    """
    a = np.asarray(arrival_s, dtype=float)
    p = np.asarray(prompt_tokens, dtype=np.int64)
    o = np.asarray(output_tokens, dtype=np.int64)
    labels = np.asarray(["all"] * a.size if classes is None else classes, dtype=str)
    if not (a.size == p.size == o.size == labels.size) or a.size == 0:
        raise InputError("trace arrays are empty or of different lengths", fix="pass one value per request")
    if not np.all(np.isfinite(a)) or (a < 0).any() or (p < 1).any() or (o < 1).any():
        raise InputError("trace has negative times or lengths below 1", fix="clean the trace")
    order = np.argsort(a, kind="stable")
    names, cid = np.unique(labels[order], return_inverse=True)
    a = a[order]
    return RequestStream(
        a - a[0],
        p[order],
        o[order],
        cid.astype(np.int64),
        tuple(str(x) for x in names),
        np.full(a.size, ttft_slo_s),
        np.full(a.size, tpot_slo_s),
        source,
        None if prefix_blocks is None else prefix_blocks.take(order),
    )


def stream_from_workload(wl: Workload, seed: int = 0) -> RequestStream:
    """A stream from a planner :class:`Workload` (one class, its name, unless it carries ``class_labels``); a
    workload without timestamps (a length-only file with a rate) gets Poisson arrivals at its rate from ``seed``.

    Raises:
        InputError: no timestamps and no rate.
    """
    arrival = wl.arrival_s
    if arrival is None:
        if not wl.arrival_rate_per_s:
            raise InputError(f"workload {wl.name} has neither timestamps nor a rate", fix="give the workload a rate")
        rng = np.random.default_rng(seed)
        arrival = np.cumsum(rng.exponential(1.0 / wl.arrival_rate_per_s, wl.n_requests))
    labels = [wl.name] * wl.n_requests if wl.class_labels is None else wl.class_labels
    return make_stream(arrival, wl.prompt_tokens, wl.output_tokens, labels, source=wl.source,
                       prefix_blocks=wl.prefix_blocks)  # fmt: skip


__all__ = [
    "MAX_TOKENS",
    "ClassSlo",
    "RequestStream",
    "Workload",
    "make_stream",
    "make_workload",
    "stream_from_workload",
]
