"""Unit parsing and conversion, in one place.

Durations accept ``2s``, ``80ms``, ``1.5 s``, ``500us``, ``10m``, ``1h``; text without a unit is refused (on the
command line and in scenario files, whose duration fields refuse bare numbers: :mod:`hetplan.scenario`); a Python
number passed to :func:`parse_duration_s` is seconds. Shares and percentiles have one rule everywhere
(:func:`parse_share`): a bare number is a fraction in [0, 1], a percent carries its ``%`` (or the ``p`` of a
percentile), so ``0.9``, ``90%`` and ``p90`` are all 90 % and no value reads two ways (``1`` is 100 %; ``1.5`` and
``90`` are refused with the fix ``1.5%`` / ``90%``). Sizes use GiB = 2**30 bytes for memory and
GB = 1e9 bytes for bandwidth, as vendors do.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from hetplan.errors import InputError

if TYPE_CHECKING:
    from hetplan.plan.deployment import Purchase

MIN_SLO_S = 1e-4
MAX_SLO_S = 3600.0
GIB = 2**30
GB = 1e9
TERA = 1e12

_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|us|µs|min|m|h)?\s*$")
_SCALE = {None: 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "min": 60.0, "m": 60.0, "h": 3600.0}


def rnd(x: float, digits: int = 6) -> float:
    """Round to ``digits`` significant digits for stable, readable output (0, inf and NaN unchanged)."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")


def parse_duration_s(
    value: str | float | int, field: str = "duration", min_s: float | None = None, max_s: float | None = None
) -> float:
    """Parse a duration such as ``2s``, ``80ms``, ``10m`` or ``1h`` (text needs a unit; ``m`` is minutes, ``ms``
    milliseconds) or a number of seconds into seconds, within [min_s, max_s] (default: the SLO range).

    Raises:
        InputError: the text is not a positive duration; the message names ``field``.
    """
    if isinstance(value, bool):
        raise InputError(f"{field}: {value!r} is not a duration", fix="write it like '2s' or '80ms'")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION_RE.match(str(value))
        if not match:
            raise InputError(
                f"{field}: cannot read {value!r} as a duration",
                "expected a number followed by s, ms or us",
                f"write it like '2s' or '80ms', e.g. --{field.replace('_', '-')} 80ms",
            )
        if match.group(2) is None:
            raise InputError(
                f"{field}: {value!r} has no unit",
                "a bare number is ambiguous (800 could mean 800 ms or 800 s)",
                f"write it with a unit, e.g. --{field.replace('_', '-')} {value}ms or {value}s",
            )
        seconds = float(match.group(1)) * _SCALE[match.group(2)]
    low = MIN_SLO_S if min_s is None else min_s
    high = MAX_SLO_S if max_s is None else max_s
    if not low <= seconds <= high:
        raise InputError(
            f"{field}: {value!r} is outside {low:g} s .. {high:g} s",
            fix="give a duration such as 2s, 80ms or 10m",
        )
    return seconds


def parse_share(
    value: str | float | int,
    field: str = "percentile",
    low: float = 0.0,
    high: float = 1.0,
    low_open: bool = True,
    high_open: bool = False,
    example: str = "90",
) -> float:
    """Parse a share or percentile into a fraction, one rule for every option and scenario field: a bare number
    is a fraction (``0.9`` is 90 %), a percent carries its sign (``90%``, ``99.9 %``) or, for percentiles, the
    ``p`` prefix (``p90``, ``p99.9``). A bare number above 1 is refused (``90`` could only be a percent written
    without its sign, and ``1.5`` would read as 1.5 % while ``1`` reads as 100 %): no value reads two ways.

    The fraction must lie in [low, high] (``low_open``/``high_open`` exclude the ends). ``field`` names the option
    in messages (``--target``).

    Raises:
        InputError: unreadable, not finite, a bare number above 1, or out of range; the message names ``field``
            and the accepted forms.
    """
    sep = " " if field.startswith("-") else ": "  # --target 90% on the command line, percentile: p90 in a file
    forms = f"write e.g. {field}{sep}{example}%, p{example} or {float(example) / 100:g}"
    if isinstance(value, bool):
        raise InputError(f"{field}: {value!r} is not a percentile", fix=forms)
    text = str(value).strip().lower()
    percent = text.startswith("p") or text.endswith("%")
    body = text.removeprefix("p").removesuffix("%").strip()
    if len(body) > 32:
        raise InputError(f"{field}: cannot read {str(value)[:24]!r}...", "expected a percent or a fraction", forms)
    try:
        number = float(body)
    except ValueError:
        raise InputError(f"{field}: cannot read {value!r}", "expected a percent or a fraction", forms) from None
    if not math.isfinite(number):
        raise InputError(f"{field}: {value!r} is not a finite number", fix=forms)
    if not percent and number > 1.0:
        raise InputError(
            f"{field}: {value!r} is a bare number above 1",
            "a bare number is a fraction (0.9 is 90 %); a percent carries its sign",
            f"write {field}{sep}{number:g}% (or p{number:g}) for {number:g} %, or {number / 100:g} as a fraction",
        )
    fraction = number / 100.0 if percent else number
    above = fraction > low if low_open else fraction >= low
    below = fraction < high if high_open else fraction <= high
    if not (above and below):
        span = f"{'(' if low_open else '['}{low * 100:g} %, {high * 100:g} %{')' if high_open else ']'}"
        raise InputError(f"{field}: {value!r} ({fraction * 100:g} %) is outside {span}", fix=forms)
    return fraction


def parse_percentile(value: str | float, field: str = "percentile") -> float:
    """Parse an SLO percentile given as ``p90``, ``90%``, ``0.9`` or ``p99.9`` into a fraction in [0.5, 0.9999]
    (:func:`parse_share`'s rule: a bare ``90`` is refused with the fix ``p90``).

    Raises:
        InputError: unreadable, or outside p50 .. p99.99 (percentiles below the median say little about latency,
            and 100 % cannot be planned for).
    """
    return parse_share(value, field, 0.5, 0.9999, low_open=False, high_open=False)


def format_duration(seconds: float) -> str:
    """Render seconds as ``123 ms`` or ``1.23 s`` for tables."""
    if seconds != seconds or seconds == float("inf"):
        return "inf"
    if seconds < 1.0:
        return f"{seconds * 1e3:.0f} ms" if seconds >= 0.01 else f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def cost_vs(other_usd_per_hour: float, this_usd_per_hour: float) -> str:
    """Another plan's cost against this plan's, the one rule every cost comparison of ``plan`` and ``report``
    uses: ``30.5 % more``, ``12.0 % less`` (a share of this plan's $/h), ``the same`` (within $0.005/h), or in
    dollars (``$17.94/h less``) when either costs $0/h (owned GPUs without a price: no percentage is defined, and
    "100 % less" says nothing)."""
    diff = other_usd_per_hour - this_usd_per_hour
    if abs(diff) < 0.005:
        return "the same"
    word = "more" if diff > 0 else "less"
    if this_usd_per_hour > 0 and other_usd_per_hour > 0:
        return f"{abs(diff) / this_usd_per_hour * 100:.1f} % {word}"
    return f"${abs(diff):,.2f}/h {word}"


#: How providers are written in purchase sentences (others as the catalog spells them).
PROVIDER_NAMES = {"aws": "AWS", "gcp": "GCP", "azure": "Azure", "lambda": "Lambda", "runpod": "RunPod",
                  "nebius": "Nebius"}  # fmt: skip


def money_per_month(usd: float) -> str:
    """``$71.8k/month``, ``$730/month``, ``$1.23M/month``, ``$1,200M/month``: a monthly figure a manager reads at a
    glance (never ``$1000.0k`` or ``$1.2e+03M``: each range starts where the one below would round up to it)."""
    if usd >= 999_950:
        millions = usd / 1e6
        return f"${millions:.3g}M/month" if millions < 999.5 else f"${millions:,.0f}M/month"
    if usd >= 999.5:
        return f"${usd / 1e3:.1f}k/month"
    return f"${usd:,.0f}/month"


def purchase_words(purchase: Iterable[Purchase]) -> list[str]:
    """A plan's purchase lines in a buyer's words, one phrase per provider and region and one for the owned nodes:
    ``["rent 1 AWS p5.48xlarge and 2 AWS g6e.2xlarge in us-east-1", "use 1 owned 8-GPU L40S node"]`` (empty for
    a plan without purchase lines, priced per GPU). The plan's decision line and the report's sentence both say
    what is bought this way."""
    rented: dict[tuple[str, str], list[str]] = {}
    owned: list[str] = []
    for p in purchase:
        if p.owned:
            owned.append(f"{p.count:,} owned {p.gpus_per_instance}-GPU {p.gpu} node{'s' if p.count != 1 else ''}")
            continue
        rented.setdefault((p.provider, p.region), []).append(
            f"{p.count:,} {PROVIDER_NAMES.get(p.provider, p.provider)} {p.instance_type}"
        )
    parts = [f"rent {' and '.join(items)}" + (f" in {region}" if region else "") for (_, region), items in
             rented.items()]  # fmt: skip
    if owned:
        parts.append("use " + " and ".join(owned))
    return parts


def format_signed_percent(fraction: float, decimals: int = 1) -> str:
    """Render a fraction as a signed percentage, ``-65.7 %`` or ``+0.0 %``; never ``-0.0 %`` (a change that rounds
    to zero has no sign)."""
    value = round(fraction * 100, decimals) + 0.0  # + 0.0 turns -0.0 into 0.0
    return f"{value:+.{decimals}f} %"
