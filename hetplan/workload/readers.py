"""Workload readers: Azure LLM inference traces, Mooncake JSONL, length-only CSVs and synthetic distributions.

A :class:`Workload` is what the planner needs: the mean arrival rate (req/s) and samples of prompt and output
lengths (tokens). Formats:

- Azure CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``; Patel et al., Splitwise, ISCA 2024, CC-BY-4.0).
- Mooncake JSONL (``timestamp`` in ms, ``input_length``, ``output_length``; ``hash_ids`` ignored).
- Length-only CSV (e.g. ShareGPT stats: ``num_prefill_tokens, num_decode_tokens``); the rate must be given.
- Synthetic: lognormal lengths with a Poisson rate, including Cauchy's three request classes.

Source: formats from the public traces; the synthetic class parameters are hetplan's own reconstruction (the
Cauchy paper names the classes but does not publish their distributions).
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hetplan.errors import InputError

# name -> (median prompt tokens, median output tokens); lognormal sigma 0.6 for both.
SYNTHETIC_CLASSES: dict[str, tuple[float, float]] = {
    "long-input-short-output": (4096.0, 64.0),
    "balanced": (1024.0, 512.0),
    "short-input-long-output": (256.0, 1024.0),
}


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
    """

    name: str
    source: str
    attribution: str
    arrival_rate_per_s: float | None
    duration_s: float | None
    prompt_tokens: np.ndarray = field(repr=False)
    output_tokens: np.ndarray = field(repr=False)
    arrival_s: np.ndarray | None = field(default=None, repr=False)

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
        }

    def sample(self, max_requests: int) -> tuple[np.ndarray, np.ndarray]:
        """Deterministic subsample (every k-th request after sorting by index) of at most ``max_requests``."""
        n = self.n_requests
        if n <= max_requests:
            return self.prompt_tokens, self.output_tokens
        idx = np.linspace(0, n - 1, max_requests).round().astype(int)
        return self.prompt_tokens[idx], self.output_tokens[idx]


MAX_TOKENS = 10_000_000
MAX_SYNTHETIC_REQUESTS = 1_000_000


def _tokens(values: Any, column: str, source: str, minimum: int) -> np.ndarray:
    """Validate a column of token counts: numeric, finite, integral, within [minimum, MAX_TOKENS].

    Raises:
        InputError: naming the first bad row (1-based data row) and column.
    """
    series = pd.Series(values)
    if series.map(lambda v: isinstance(v, bool)).any():
        series = series.map(lambda v: float("nan") if isinstance(v, bool) else v)
    numbers = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(numbers) | (numbers != np.round(numbers)) | (numbers < minimum) | (numbers > MAX_TOKENS)
    if bad.any():
        row = int(np.nonzero(bad)[0][0])
        raise InputError(
            f"workload {source}: {column} in row {row + 1} is {values[row]!r}",
            f"{int(bad.sum())} row(s) have {column} that is not a whole number in [{minimum}, {MAX_TOKENS:,}]",
            "clean the trace: token counts are whole numbers, prompts have at least 1 token",
        )
    return numbers.astype(np.int64)


def _finish(
    name: str,
    source: str,
    attribution: str,
    times_s: np.ndarray | None,
    prompt: Any,
    output: Any,
    rate_per_s: float | None,
    prompt_column: str = "prompt tokens",
    output_column: str = "output tokens",
) -> Workload:
    if len(prompt) == 0:
        raise InputError(f"workload {source} has no requests", fix="pass a trace with at least one row")
    prompt_tokens = _tokens(np.asarray(prompt, dtype=object), prompt_column, source, 1)
    output_tokens = np.maximum(_tokens(np.asarray(output, dtype=object), output_column, source, 0), 1)
    duration = None
    if times_s is not None and times_s.size > 1:
        if not np.all(np.isfinite(times_s)):
            raise InputError(f"workload {source}: some timestamps are not finite numbers", fix="fix the timestamps")
        duration = float(times_s.max() - times_s.min())
        if rate_per_s is None and duration > 0:
            rate_per_s = (times_s.size - 1) / duration
    arrival = None if times_s is None else np.asarray(times_s, dtype=float) - float(np.min(times_s))
    return Workload(name, source, attribution, rate_per_s, duration, prompt_tokens, output_tokens, arrival)


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read workload {path}", str(exc).splitlines()[0], "check the path and format"
        ) from None


AZURE_ATTRIBUTION = "Azure LLM inference trace 2023 (Patel et al., Splitwise, ISCA 2024), CC-BY-4.0"
MOONCAKE_ATTRIBUTION = "Mooncake trace (kvcache-ai/Mooncake, FAST'25), Apache-2.0"


def read_azure_csv(path: Path, rate_per_s: float | None = None, display: str | None = None) -> Workload:
    """Read an Azure LLM inference trace CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``).

    ``display`` is the name recorded as the workload's source (default: the path)."""
    df = _read_csv(path)
    missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(df.columns)
    if missing:
        raise InputError(
            f"{path} is not an Azure trace: missing columns {sorted(missing)}",
            fix="pass a CSV with TIMESTAMP, ContextTokens, GeneratedTokens",
        )
    if pd.api.types.is_numeric_dtype(df["TIMESTAMP"]):
        raise InputError(
            f"{path}: TIMESTAMP holds numbers, not date-times",
            "the Azure format has timestamps like '2023-11-16 18:15:46.6805900'",
            "convert the timestamps, or use a Mooncake JSONL (timestamp in ms) for numeric times",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns while inferring the format; bad rows are reported below
        times = pd.to_datetime(df["TIMESTAMP"], errors="coerce", format="mixed")
    if times.isna().any():
        row = int(np.nonzero(times.isna().to_numpy())[0][0])
        raise InputError(
            f"{path}: TIMESTAMP in row {row + 1} is not a date-time ({df['TIMESTAMP'].iloc[row]!r})",
            f"{int(times.isna().sum())} row(s) affected",
            "timestamps look like '2023-11-16 18:15:46.68'",
        )
    seconds = (times - times.min()).dt.total_seconds().to_numpy()
    return _finish(
        path.stem,
        display or str(path),
        AZURE_ATTRIBUTION,
        seconds,
        df["ContextTokens"].to_numpy(),
        df["GeneratedTokens"].to_numpy(),
        rate_per_s,
        "ContextTokens",
        "GeneratedTokens",
    )


def read_mooncake_jsonl(path: Path, rate_per_s: float | None = None, display: str | None = None) -> Workload:
    """Read a Mooncake JSONL trace (``timestamp`` ms, ``input_length``, ``output_length``)."""
    times, prompt, output = [], [], []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    times.append(float(row["timestamp"]) / 1e3)
                    prompt.append(row["input_length"])
                    output.append(row["output_length"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError, OverflowError) as exc:
                    raise InputError(
                        f"{path}:{lineno} is not a Mooncake record ({type(exc).__name__}: {exc})",
                        fix="each line needs timestamp (ms), input_length, output_length",
                    ) from None
    except OSError as exc:
        raise InputError(f"cannot read workload {path}", str(exc), "check the path") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"workload {path} is not UTF-8 text", str(exc), "pass a JSONL text file") from None
    return _finish(
        path.stem,
        display or str(path),
        MOONCAKE_ATTRIBUTION,
        np.array(times, dtype=float),
        prompt,
        output,
        rate_per_s,
        "input_length",
        "output_length",
    )


def read_length_csv(path: Path, rate_per_s: float | None = None, display: str | None = None) -> Workload:
    """Read a length-only CSV (``num_prefill_tokens, num_decode_tokens`` or ``prompt_tokens, output_tokens``).
    The arrival rate comes from ``rate_per_s``; without it the goodput target must be given."""
    df = _read_csv(path)
    for pcol, ocol in (
        ("num_prefill_tokens", "num_decode_tokens"),
        ("prompt_tokens", "output_tokens"),
        ("input_length", "output_length"),
    ):
        if pcol in df.columns and ocol in df.columns:
            return _finish(
                path.stem,
                display or str(path),
                "",
                None,
                df[pcol].to_numpy(),
                df[ocol].to_numpy(),
                rate_per_s,
                pcol,
                ocol,
            )
    raise InputError(
        f"{path}: no prompt/output length columns",
        f"columns are {list(df.columns)[:6]}",
        "use num_prefill_tokens/num_decode_tokens or prompt_tokens/output_tokens",
    )


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
    wl = _finish(kind, source, "", times, prompt, output, None)
    return Workload(wl.name, wl.source, "", rate_per_s, wl.duration_s, wl.prompt_tokens, wl.output_tokens, wl.arrival_s)


def load_workload(
    path: str | Path, fmt: str = "auto", rate_per_s: float | None = None, display: str | None = None
) -> Workload:
    """Read a workload file, detecting the format from the extension and header when ``fmt`` is ``auto``.

    Raises:
        InputError: missing file, unknown format or malformed content.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"workload {path} is a folder, not a file", fix="pass the trace file itself")
    if not path.is_file():
        raise InputError(f"workload file {path} does not exist", fix="check the --workload path")
    if fmt == "auto":
        if path.suffix in (".jsonl", ".ndjson"):
            fmt = "mooncake"
        else:
            with open(path, encoding="utf-8", errors="replace") as fh:
                header = fh.readline()
            fmt = "azure" if "ContextTokens" in header else "lengths"
    readers = {"azure": read_azure_csv, "mooncake": read_mooncake_jsonl, "lengths": read_length_csv}
    if fmt not in readers:
        raise InputError(
            f"unknown workload format {fmt!r}", f"known: {', '.join(readers)}, synthetic", "set format to one of them"
        )
    return readers[fmt](path, rate_per_s, display)
