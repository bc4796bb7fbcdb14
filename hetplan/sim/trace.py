"""Request streams for the simulator: one or more traces mixed into one arrival stream, with request classes.

Each trace file is read by hetplan's workload readers (Azure CSV, Mooncake JSONL). A request's class is the
trace it came from (its file stem, e.g. ``AzureLLMInferenceTrace_code``), or the value of a column named by
``class_column`` in a CSV. Each class may carry its own TTFT/TPOT SLOs (``ClassSlo``), e.g. a tight TTFT for
code completion and a looser one for conversation. ``rate_scale`` X compresses the arrival times by X (X = 2
doubles the arrival rate and keeps the burst pattern).

Source: hetplan's own reconstruction (the mixed conversation + code stream follows CASCADE's evaluation set-up).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hetplan.errors import InputError
from hetplan.workload.readers import Workload, load_workload


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
    """

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    class_id: np.ndarray
    class_names: tuple[str, ...]
    ttft_slo_s: np.ndarray
    tpot_slo_s: np.ndarray
    source: str

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
        )

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
        )


def make_stream(
    arrival_s: np.ndarray,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    classes: list[str] | np.ndarray | None = None,
    ttft_slo_s: float = 2.0,
    tpot_slo_s: float = 0.1,
    source: str = "in memory",
) -> RequestStream:
    """Build a stream from arrays (sorted by arrival, stable; ties keep the given order).

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
    )


def stream_from_workload(wl: Workload, seed: int = 0) -> RequestStream:
    """A one-class stream from a planner :class:`Workload`; a workload without timestamps (a length-only file
    with a rate) gets Poisson arrivals at its rate from ``seed``.

    Raises:
        InputError: no timestamps and no rate.
    """
    arrival = wl.arrival_s
    if arrival is None:
        if not wl.arrival_rate_per_s:
            raise InputError(f"workload {wl.name} has neither timestamps nor a rate", fix="give the workload a rate")
        rng = np.random.default_rng(seed)
        arrival = np.cumsum(rng.exponential(1.0 / wl.arrival_rate_per_s, wl.n_requests))
    return make_stream(arrival, wl.prompt_tokens, wl.output_tokens, [wl.name] * wl.n_requests, source=wl.source)


def read_stream(
    paths: list[str | Path], class_column: str | None = None, ttft_slo_s: float = 2.0, tpot_slo_s: float = 0.1
) -> RequestStream:
    """Read one or more traces and mix them into one stream by arrival time.

    Each file's times start at 0; the class is the file stem, or the ``class_column`` value (CSV only).

    Raises:
        InputError: a file is missing or malformed, has no timestamps, or lacks ``class_column``.
    """
    if not paths:
        raise InputError("no trace given", fix="pass --trace FILE")
    arrivals, prompts, outputs, labels = [], [], [], []
    for path in paths:
        if not Path(path).is_file():
            raise InputError(f"trace file {path} does not exist", fix="check the --trace path")
        wl = load_workload(path)
        if wl.arrival_s is None:
            raise InputError(
                f"trace {path} has no timestamps",
                "the simulator replays arrival times",
                "pass an Azure CSV or a Mooncake JSONL",
            )
        arrivals.append(wl.arrival_s)
        prompts.append(wl.prompt_tokens)
        outputs.append(wl.output_tokens)
        if class_column:
            try:
                col = pd.read_csv(path, usecols=[class_column])[class_column].astype(str).to_numpy()
            except (ValueError, OSError, pd.errors.ParserError) as exc:
                raise InputError(
                    f"trace {path} has no column {class_column!r}",
                    str(exc).splitlines()[0],
                    "name an existing column with --class-column",
                ) from None
            labels.append(col)
        else:
            labels.append(np.full(wl.n_requests, Path(path).stem))
    return make_stream(
        np.concatenate(arrivals),
        np.concatenate(prompts),
        np.concatenate(outputs),
        np.concatenate(labels),
        ttft_slo_s,
        tpot_slo_s,
        " + ".join(str(Path(p).name) for p in paths),
    )


__all__ = ["ClassSlo", "RequestStream", "make_stream", "read_stream", "stream_from_workload"]
