"""Formatting shared by the renderers: missing values as ``-``, counted nouns, warning lines."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape

from hetplan.tables import fit_numbers
from hetplan.units import format_duration

__all__ = ["count_noun", "duration", "fit_numbers", "num", "percent", "print_warnings", "tokens_per_usd",
           "tokens_per_usd_phrase"]  # fmt: skip


def num(x: float | None) -> str:
    """A number in its shortest form (``%g``), ``-`` when missing."""
    return "-" if x is None else f"{x:g}"


def duration(x: float | None) -> str:
    """Seconds with a unit (``800 ms``, ``2.00 s``), ``-`` when missing."""
    return "-" if x is None else format_duration(x)


def percent(x: float | None) -> str:
    """A fraction as a percent with one decimal (``0.912`` -> ``91.2%``), ``-`` when missing."""
    return "-" if x is None else f"{x * 100:.1f}%"


def tokens_per_usd(value: float | None, usd_per_hour: float | None, thousands: bool = False) -> str:
    """Tokens per USD (``387,512``, or ``388k`` with ``thousands``); ``-`` when missing or when the cost is $0/h
    (owned GPUs without a price: tokens per dollar is not defined, and the plan file's 0 or null means just that)."""
    if value is None or not usd_per_hour:
        return "-"
    return f"{value / 1e3:,.0f}k" if thousands else f"{value:,.0f}"


def tokens_per_usd_phrase(value: float | None, usd_per_hour: float | None) -> str:
    """``387,512 tokens/USD (in+out)`` for a table title; at $0/h (all GPUs owned, priced at $0) says why there is
    no figure instead."""
    if not usd_per_hour:
        return "tokens/USD not defined at $0/h (owned GPUs without a price)"
    return f"{tokens_per_usd(value, usd_per_hour)} tokens/USD (in+out)"


def count_noun(n: int, noun: str) -> str:
    """``no objects``, ``1 object``, ``2 objects``."""
    return f"no {noun}s" if n == 0 else f"{n} {noun}" + ("" if n == 1 else "s")


def print_warnings(console: Console, texts: Iterable[str], label: str = "warning") -> None:
    """One ``label: text`` line per text, the label in yellow, the text printed as is (no markup)."""
    for text in texts:
        console.print(f"[yellow]{label}:[/] {escape(text)}", highlight=False)
