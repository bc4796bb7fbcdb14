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


def _first_char(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.strip():
                return line.strip()[0]
    return ""


def _trace_format(path: Path) -> str:
    """``mooncake`` for JSON lines (by extension, or a ``.json`` file whose content starts with ``{``), ``azure``
    for a CSV with ``ContextTokens``, else ``auto`` (the workload reader decides)."""
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        return "mooncake"
    if path.suffix.lower() == ".json" or _first_char(path) == "{":
        return "mooncake" if _first_char(path) == "{" else "auto"
    with open(path, encoding="utf-8", errors="replace") as fh:
        header = fh.readline()
    return "azure" if "ContextTokens" in header else "auto"


def _azure_start_s(path: Path) -> float:
    """The first TIMESTAMP of an Azure CSV as seconds since the epoch (the reader already checked the column)."""
    col = pd.read_csv(path, usecols=["TIMESTAMP"])["TIMESTAMP"]
    times = pd.to_datetime(col, errors="coerce", format="mixed")
    return float(times.min().value) / 1e9


def _class_labels(path: Path, class_column: str, n: int) -> np.ndarray:
    try:
        raw = pd.read_csv(path, usecols=[class_column], dtype=str, keep_default_na=False)[class_column]
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(
            f"trace {path} has no column {class_column!r}",
            str(exc).splitlines()[0],
            "name an existing column with --class-column",
        ) from None
    col = raw.str.strip().to_numpy(dtype=str)
    empty = np.nonzero(col == "")[0]
    if empty.size:
        raise InputError(
            f"trace {path}: --class-column {class_column!r} is empty in data row {int(empty[0]) + 1}",
            f"{empty.size} row(s) have no class",
            f"fill in {class_column!r} for every row, or drop --class-column",
        )
    if col.size != n:
        raise InputError(f"trace {path}: {class_column!r} has {col.size} values for {n} requests", fix="fix the CSV")
    return col


def read_stream(
    paths: list[str | Path], class_column: str | None = None, ttft_slo_s: float = 2.0, tpot_slo_s: float = 0.1
) -> RequestStream:
    """Read one or more traces and mix them into one stream by arrival time.

    Clocks: when every file is an Azure CSV (absolute date-time TIMESTAMPs), the files keep their real offsets
    (the stream starts at the earliest first arrival of all files); otherwise (a Mooncake trace holds relative
    milliseconds) each file's first arrival is at 0. The class is the file stem, or the ``class_column`` value
    (CSV only). The merged order does not depend on the order of ``paths``: requests are sorted by arrival time,
    then class name, then position in their file. A ``.json`` file holding JSON lines is read as Mooncake.

    Raises:
        InputError: a file is missing, a folder, malformed or passed twice; two files share a stem (without
            ``class_column``); a file has no timestamps; ``class_column`` is missing, empty in a row, or given
            for a JSON lines trace.
    """
    if not paths:
        raise InputError("no trace given", fix="pass --trace FILE")
    arrivals, prompts, outputs, labels, starts, formats = [], [], [], [], [], []
    seen: dict[Path, str] = {}
    stems: dict[str, str] = {}
    for path in map(Path, paths):  # checks that need no parsing come first
        if path.is_dir():
            raise InputError(f"trace {path} is a directory, not a file", fix="pass the trace file itself to --trace")
        if not path.is_file():
            raise InputError(f"trace file {path} does not exist", fix="check the --trace path")
        if class_column and _trace_format(path) == "mooncake":
            raise InputError(
                f"--class-column is for CSV traces; {path} holds JSON lines",
                "classes of a JSON lines trace are its file stem",
                "drop --class-column, or convert the trace to CSV",
            )
    for path in map(Path, paths):
        if path.is_dir():
            raise InputError(f"trace {path} is a directory, not a file", fix="pass the trace file itself to --trace")
        if not path.is_file():
            raise InputError(f"trace file {path} does not exist", fix="check the --trace path")
        real = path.resolve()
        if real in seen:
            raise InputError(f"trace {path} is given twice", fix="pass each --trace file once")
        seen[real] = str(path)
        if class_column is None and path.stem in stems:
            raise InputError(
                f"traces {stems[path.stem]} and {path} have the same name {path.stem!r}",
                "a request's class is its file's stem, so both files would merge into one class",
                "rename one of the files, or name each request's class with --class-column",
            )
        stems[path.stem] = str(path)
        fmt = _trace_format(path)
        wl = load_workload(path, fmt)
        if wl.arrival_s is None:
            raise InputError(
                f"trace {path} has no timestamps",
                "the simulator replays arrival times",
                "pass an Azure CSV or a Mooncake JSONL",
            )
        formats.append(fmt)
        starts.append(_azure_start_s(path) if fmt == "azure" else 0.0)
        arrivals.append(wl.arrival_s)
        prompts.append(wl.prompt_tokens)
        outputs.append(wl.output_tokens)
        labels.append(_class_labels(path, class_column, wl.n_requests) if class_column else
                      np.full(wl.n_requests, path.stem))  # fmt: skip
    if all(f == "azure" for f in formats):  # absolute clocks: keep the real offsets between files
        t0 = min(starts)
        arrivals = [a + (st - t0) for a, st in zip(arrivals, starts, strict=True)]
    a = np.concatenate(arrivals)
    lab = np.concatenate(labels).astype(str)
    pos = np.concatenate([np.arange(x.size) for x in arrivals])
    order = np.lexsort((pos, lab, a))  # arrival, then class name, then position in its file
    return make_stream(
        a[order],
        np.concatenate(prompts)[order],
        np.concatenate(outputs)[order],
        lab[order],
        ttft_slo_s,
        tpot_slo_s,
        " + ".join(sorted(str(Path(p).name) for p in paths)),
    )


__all__ = ["ClassSlo", "RequestStream", "make_stream", "read_stream", "stream_from_workload"]
