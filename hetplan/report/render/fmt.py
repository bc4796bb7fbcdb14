"""Number formats every report format shares: dollars, percentages, tokens/USD, durations, shares, GPU counts.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping

from hetplan.units import format_signed_percent


def usd(x: float | None) -> str:
    """``$1,234.57``, ``-`` for None."""
    return "-" if x is None else f"${x:,.2f}"


def pct(x: float | None) -> str:
    """A signed percentage (``+12.3 %``), ``-`` for None."""
    return "-" if x is None else format_signed_percent(x)


def tokens(x: float | None) -> str:
    """Tokens/USD, ``-`` when not defined (None: the plan costs $0/h, see :func:`hetplan.report.model.per_usd`)."""
    return "-" if x is None else f"{x:,.0f}"


def ms(x: float) -> str:
    """Seconds as ``250 ms`` below one second, ``1.50 s`` from one second up."""
    return f"{x * 1e3:.0f} ms" if x < 1 else f"{x:.2f} s"


def gpus(used: Mapping[str, int]) -> str:
    """``8x H100-SXM, 2x L40S``."""
    return ", ".join(f"{n}x {g}" for g, n in used.items())


def opt(x: float | None, fmt: str) -> str:
    """``x`` in ``fmt``, ``-`` for None."""
    return "-" if x is None else format(x, fmt)


def share(x: float | None) -> str:
    """A share (0-1) as ``98.9 %``, ``-`` for None."""
    return "-" if x is None else f"{x * 100:.1f} %"


def vs_slo(x: float | None, slo: float) -> str:
    """A simulated latency (seconds) against its SLO: ``534 ms vs SLO 1.00 s: met``."""
    if x is None:
        return f"- (not finite) vs SLO {ms(slo)}"
    return f"{ms(x)} vs SLO {ms(slo)}: " + ("met" if x <= slo else "MISSED")
