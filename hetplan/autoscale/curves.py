"""Load curves: arrival rate (and burstiness) per time window.

Sources:
- ServeGen per-window files (no header; ``window_start_s, rate_rps, cv, distribution, param1, param2``): one client of
  Alibaba Bailian, 600 s windows over 14 days (alibaba/ServeGen, Apache-2.0).
- Any request trace with timestamps (Azure CSV, Mooncake JSONL), binned into windows; the CV is that of the
  inter-arrival gaps inside each window.
- A synthetic diurnal curve: a cosine between a trough and a peak rate with its maximum at ``peak_hour``.

Burstiness (hetplan's own reconstruction, after the Allen-Cunneen approximation for G/G/c queues): with
inter-arrival coefficient of variation c_a and service CV c_s, waiting times are about φ = (c_a² + c_s²)/(1 + c_s²)
times those under Poisson arrivals. Keeping the same wait at the plans' design utilisation ρ_d needs the capacity
that Poisson demand ``λ_eff = λ · (φ · (1 - ρ_d) + ρ_d)`` needs, so a window is planned for λ_eff. c_a is capped
(``max_cv``): the approximation is not meant for extreme burstiness, and a capped window says so in the schedule.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hetplan.errors import InputError
from hetplan.input_checks import MAX_SPAN_S, check_input_file, check_number
from hetplan.workload.readers import load_workload

SERVEGEN_ATTRIBUTION = "ServeGen (alibaba/ServeGen), Apache-2.0"
#: Window bounds in seconds, the same as `hetplan autoscale --window` accepts (1 s .. one day).
MIN_WINDOW_S = 1.0
MAX_WINDOW_S = 86400.0
#: Most windows in a load curve: about 2 years of 10-minute windows, or 27 hours of 1-second ones (the diurnal
#: generator has the same bound); more is a wrong --window or timestamps in the wrong unit. (It was 1,000,000: a
#: schedule of that many windows took over a minute and its file, 311 MB, was over what ``report`` reads, 64 MiB.)
MAX_WINDOWS = 100_000
#: Highest rate in a window, req/s: the scenario's goodput bound (no planner run sizes a larger fleet).
MAX_RATE_PER_S = 1e7


@dataclass(frozen=True, eq=False)
class LoadCurve:
    """Arrival rate per window.

    Attributes:
        name, source, attribution: provenance.
        window_s: window length, seconds.
        start_s: shape (W,), window start times, seconds.
        rate_req_per_s: shape (W,), mean arrival rate in each window, req/s (>= 0).
        cv: shape (W,), coefficient of variation of inter-arrival gaps (1 = Poisson).
    """

    name: str
    source: str
    attribution: str
    window_s: float
    start_s: np.ndarray = field(repr=False)
    rate_req_per_s: np.ndarray = field(repr=False)
    cv: np.ndarray = field(repr=False)

    @property
    def windows(self) -> int:
        return int(self.rate_req_per_s.size)

    def effective_rate(
        self, design_utilization: float = 0.8, service_cv: float = 1.0, max_cv: float = 4.0
    ) -> np.ndarray:
        """Poisson-equivalent demand per window, req/s (module docstring), shape (W,)."""
        ca = np.clip(np.where(self.cv > 0, self.cv, 1.0), 0.0, max_cv)
        phi = (ca**2 + service_cv**2) / (1.0 + service_cv**2)
        return self.rate_req_per_s * (phi * (1.0 - design_utilization) + design_utilization)


def read_servegen(path: Path) -> LoadCurve:
    """Read a ServeGen per-window trace (module docstring).

    Raises:
        InputError: unreadable file, wrong column count, non-numeric or negative values, uneven windows.
    """
    starts, rates, cvs = [], [], []
    check_input_file(path, "load curve")
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:  # a byte-order mark is not part of row 1
            for lineno, row in enumerate(csv.reader(fh), 1):
                if not row:
                    continue
                if len(row) < 3:
                    raise InputError(
                        f"{path}:{lineno}: expected window_start_s, rate_rps, cv, ...",
                        f"found {len(row)} column(s)",
                        "pass a ServeGen per-window trace file",
                    )
                try:
                    start, rate = float(row[0]), float(row[1])
                    cv = float(row[2]) if row[2].strip() else 0.0
                except ValueError:
                    raise InputError(
                        f"{path}:{lineno}: non-numeric value in {row[:3]}", fix="the first three columns are numbers"
                    ) from None
                if not (math.isfinite(start) and math.isfinite(rate) and math.isfinite(cv)) or rate < 0 or cv < 0:
                    raise InputError(
                        f"{path}:{lineno}: rate and cv must be finite and >= 0, got {row[1:3]}", fix="fix the row"
                    )
                for name, value in (("window_start_s", start), ("cv", cv)):  # the numeric rule (hetplan.input_checks)
                    check_number(value, f"{path}:{lineno}: {name}", "fix the row (seconds and a plain ratio)")
                if rate > MAX_RATE_PER_S:
                    raise InputError(
                        f"{path}:{lineno}: rate {rate:g} req/s is over {MAX_RATE_PER_S:g} req/s",
                        "no planner run sizes a fleet for more (the scenario's goodput has the same bound)",
                        "check the column is requests per second (the second column)",
                    )
                if lineno > MAX_WINDOWS:
                    raise InputError(
                        f"load curve {path} has more than {MAX_WINDOWS:,} windows",
                        fix="use longer windows (one row per window)",
                    )
                starts.append(start)
                rates.append(rate)
                cvs.append(cv if rate > 0 else 1.0)
    except OSError as exc:
        raise InputError(f"cannot read load curve {path}", str(exc), "check the path") from None
    except UnicodeDecodeError:
        raise InputError(f"load curve {path} is not UTF-8 text", fix="pass a CSV file") from None
    if len(starts) < 1:
        raise InputError(f"load curve {path} has no windows", fix="pass a file with at least one row")
    if not any(rate > 0 for rate in rates):
        raise InputError(
            f"load curve {path}: every window's rate is 0",
            "there is no traffic to plan a schedule for",
            "check the second column holds requests per second",
        )
    start_s = np.array(starts)
    if start_s.max() - start_s.min() > MAX_SPAN_S:
        raise InputError(
            f"load curve {path} spans {(start_s.max() - start_s.min()) / (365.25 * 86400):,.0f} years of windows",
            "more than the century hetplan accepts: a unit error (window_start_s is seconds)",
            "check the first column",
        )
    steps = np.diff(start_s)
    window = float(steps[0]) if steps.size else 600.0
    if steps.size and (np.any(steps <= 0) or np.any(np.abs(steps - window) > 1e-6 * window)):
        raise InputError(
            f"load curve {path}: windows are not evenly spaced and increasing",
            f"first gap {window:g} s; gaps range {steps.min():g} .. {steps.max():g} s",
            "pass one row per window, in time order",
        )
    if not MIN_WINDOW_S <= window <= MAX_WINDOW_S:  # the bounds of --window: a shorter window is a zero-length one
        raise InputError(
            f"load curve {path}: windows of {window:g} s are outside {MIN_WINDOW_S:g} s .. {MAX_WINDOW_S:g} s",
            "the window is the gap between the first two rows' start times (seconds)",
            "give start times in seconds, e.g. 0, 600, 1200 for 10-minute windows",
        )
    return LoadCurve(path.stem, path.name, SERVEGEN_ATTRIBUTION, window, start_s, np.array(rates), np.array(cvs))


def bin_trace(path: Path, window_s: float) -> LoadCurve:
    """Bin a request trace (Azure CSV or Mooncake JSONL) into windows of ``window_s`` seconds.

    Raises:
        InputError: the trace has no timestamps, or the window is not positive.
    """
    if not window_s > 0:
        raise InputError(f"--window must be > 0, got {window_s}", fix="pass e.g. --window 10m")
    wl = load_workload(path)
    if wl.arrival_s is None or wl.arrival_s.size < 2:
        raise InputError(f"{path} has no timestamps to bin", fix="use an Azure or Mooncake trace, or a ServeGen file")
    times = np.sort(wl.arrival_s)
    windows = math.ceil((float(times[-1]) + 1e-9) / window_s)
    if windows > MAX_WINDOWS:
        raise InputError(
            f"{path} spans {float(times[-1]):.4g} s: {windows:.4g} windows of {window_s:g} s, "
            f"more than {MAX_WINDOWS:,}",
            "timestamps years apart or in the wrong unit (Mooncake's are milliseconds) give a curve no one plans",
            "pass a longer --window, or a trace whose timestamps cover the period you plan for",
        )
    n = max(1, int(windows))
    idx = np.minimum((times // window_s).astype(int), n - 1)
    counts = np.bincount(idx, minlength=n).astype(float)
    cvs = np.ones(n)
    for w in range(n):
        gaps = np.diff(times[idx == w])
        if gaps.size >= 2 and gaps.mean() > 0:
            cvs[w] = float(gaps.std() / gaps.mean())
    covered = np.full(n, float(window_s))
    covered[-1] = max(float(times[-1] - (n - 1) * window_s), float(window_s) / n, 1.0)  # a partial last window
    return LoadCurve(
        wl.name, wl.source, wl.attribution, float(window_s), np.arange(n) * window_s, counts / covered, cvs
    )


def diurnal(
    days: float = 1.0,
    window_s: float = 600.0,
    peak_req_per_s: float = 10.0,
    trough_req_per_s: float = 2.0,
    peak_hour: float = 14.0,
    cv: float = 1.0,
) -> LoadCurve:
    """A synthetic day-night curve (cosine with its maximum at ``peak_hour``), deterministic.

    Raises:
        InputError: non-positive sizes or a trough above the peak.
    """
    if not (
        all(math.isfinite(x) for x in (days, window_s, peak_req_per_s, trough_req_per_s, peak_hour, cv))
        and days > 0
        and window_s > 0
        and peak_req_per_s > 0
        and 0 <= trough_req_per_s <= peak_req_per_s
        and cv >= 0
        and days * 86400 / window_s <= MAX_WINDOWS
    ):
        raise InputError(
            "diurnal curve: days, window and rates out of range",
            f"days {days}, window {window_s} s, peak {peak_req_per_s}, trough {trough_req_per_s}",
            f"use finite days > 0, window > 0 and 0 <= trough <= peak (at most {MAX_WINDOWS:,} windows)",
        )
    n = int(round(days * 86400 / window_s))
    start = np.arange(n) * window_s
    hours = (start + window_s / 2) / 3600.0
    mid, amp = (peak_req_per_s + trough_req_per_s) / 2, (peak_req_per_s - trough_req_per_s) / 2
    rate = mid + amp * np.cos(2 * math.pi * (hours - peak_hour) / 24.0)
    return LoadCurve(
        "diurnal",
        f"synthetic diurnal {days:g} d, peak {peak_req_per_s:g} at {peak_hour:g} h, trough {trough_req_per_s:g} req/s",
        "",
        float(window_s),
        start,
        rate,
        np.full(n, cv),
    )


def load_curve(path: str | Path, window_s: float | None = None) -> LoadCurve:
    """Read a load curve: a ServeGen per-window file, or a request trace binned into ``window_s`` windows.

    Raises:
        InputError: missing file or unknown format.
    """
    path = check_input_file(path, "load curve")
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        first = fh.readline()
    fields = first.strip().split(",")
    is_servegen = path.suffix == ".csv" and len(fields) >= 3 and _is_number(fields[0])
    if is_servegen:
        curve = read_servegen(path)
        if window_s is not None and abs(window_s - curve.window_s) > 1e-6:
            raise InputError(
                f"{path} has {curve.window_s:g} s windows, not {window_s:g} s",
                fix=f"drop --window or pass --window {curve.window_s:g}s",
            )
        return curve
    return bin_trace(path, window_s or 600.0)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
