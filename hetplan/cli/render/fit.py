"""``hetplan profile fit``'s terminal output: the A1/A2 fit document (:func:`hetplan.solvers.ce_fit.fit_doc`) read
into typed values (:class:`FitView`) and shown as the coefficients, the relative-advantage ranking and the pairs."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from hetplan.cli.render.format import fit_numbers


class _View(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Workload(_View):
    name: str
    prompt_tokens_mean: float
    output_tokens_mean: float


class _Units(_View):
    a1: str
    a2: str


class _PrefillRank(_View):
    gpu: str
    tflops_per_usd_hour: float


class _DecodeRank(_View):
    gpu: str
    gb_per_s_per_usd_hour: float


class _Ranking(_View):
    prefill: list[_PrefillRank]
    decode: list[_DecodeRank]


class _Pair(_View):
    prefill_gpu: str
    decode_gpu: str
    tokens_per_usd: float
    fitted_tokens_per_usd: float


class _Profile(_View):
    file: str
    gpu: str


class FitView(_View):
    """What the terminal shows of a fit document (the fields :func:`render_fit` reads; the rest is ignored)."""

    model: str
    workload: _Workload
    a1: float
    a2: float
    a1_over_a2: float | None
    units: _Units
    r2: float
    spearman: float
    ranking: _Ranking
    pairs: list[_Pair]
    left_out: list[str]
    profiles: list[_Profile] = []
    warnings: list[str] = []


def render_fit(doc: dict[str, Any], console: Console) -> None:
    """A1, A2, goodness of fit, the relative-advantage ranking and the pairs (the first 12) of the fit ``doc``."""
    fit = FitView.model_validate(doc)
    ratio, wl = fit.a1_over_a2, fit.workload
    console.print(
        f"[bold]A1/A2 fit[/] for {escape(fit.model)}, workload {escape(wl.name)} "
        f"(mean prompt {wl.prompt_tokens_mean:,.0f}, output {wl.output_tokens_mean:,.0f} "
        f"tokens)\n  A1 = {fit.a1:,.6g} ({fit.units.a1})\n  A2 = {fit.a2:,.6g} ({fit.units.a2})\n"
        f"  A1/A2 = {'-' if ratio is None else f'{ratio:,.4g}'}   R² = {fit.r2:.4f}   "
        f"Spearman (fitted vs full model) = {fit.spearman:.4f}   pairs fitted: {len(fit.pairs)}",
        highlight=False,
    )
    table = Table(title="Relative advantage (best first)", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("#", "prefill GPU", "TFLOP/s per $/h", "decode GPU", "GB/s per $/h"):
        table.add_column(col, justify="right" if "per" in col or col == "#" else "left")
    for i, (p, d) in enumerate(zip(fit.ranking.prefill, fit.ranking.decode, strict=True), 1):
        table.add_row(str(i), p.gpu, f"{p.tflops_per_usd_hour:,.4g}", d.gpu, f"{d.gb_per_s_per_usd_hour:,.4g}")
    console.print(fit_numbers(table, console))
    pairs = Table(title="GPU pairs: full model vs fit (tokens/USD)", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("prefill -> decode", "full model", "fitted"):
        pairs.add_column(col, justify="left" if col.startswith("prefill") else "right")
    for row in fit.pairs[:12]:
        pairs.add_row(
            f"{row.prefill_gpu} -> {row.decode_gpu}", f"{row.tokens_per_usd:,.0f}", f"{row.fitted_tokens_per_usd:,.0f}"
        )
    console.print(fit_numbers(pairs, console))
    if len(fit.pairs) > 12:
        console.print(f"... {len(fit.pairs) - 12} more pairs (--json for all)")
    if fit.left_out:
        console.print(f"left out (no feasible combo): {escape(', '.join(fit.left_out))}", highlight=False)
    if fit.profiles:
        console.print("profiles: " + ", ".join(f"{p.file} ({p.gpu})" for p in fit.profiles), highlight=False)
    for w in fit.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


__all__ = ["FitView", "render_fit"]
