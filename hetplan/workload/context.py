"""The one over-context rule: what a serving engine does with a request longer than the model's context window.

vLLM (the engine hetplan emits for) checks a request against ``max_model_len`` (``--max-model-len``, by default
the model's ``max_position_embeddings``, which is what ``hetplan emit`` passes):

- a prompt longer than the window is **refused** (vLLM returns an error and serves nothing);
- any other request is served, and generation **stops at the window**: the output is cut to
  ``window − prompt`` tokens (vLLM finishes it with ``finish_reason="length"``), at least one token (the prefill
  iteration always yields the first token).

The planner (:mod:`hetplan.planning.request`, through :func:`served_workload`), the Hetis planner, the simulator
(:mod:`hetplan.sim.engine`) and the verification (:mod:`hetplan.sim.verify`) all apply
:func:`apply_context_window`, and report the two counts with :func:`context_note`, so a plan's warning, a
simulation's metrics and a verification agree on the numbers. ``hetplan emit`` passes ``--max-model-len`` = the
model's window by default, the window this rule uses (a smaller ``--max-model-len`` refuses more).

Source: vLLM's input processor (prompt length check against ``max_model_len``) and its stop checker (length cap);
hetplan's own reconstruction of the rule as one function.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from hetplan.errors import InputError
from hetplan.workload.model import Workload


@dataclass(frozen=True)
class ContextOutcome:
    """What the engine does with each request of a set.

    Attributes:
        refused: shape (n,), bool: the prompt is longer than the window (never served).
        output_tokens: shape (n,), int: the output the engine generates (cut at the window; unchanged for refused
            requests, which generate nothing).
        truncated: shape (n,), bool: served with the output cut at the window.
        window_tokens: the context window, tokens.
    """

    refused: np.ndarray
    output_tokens: np.ndarray
    truncated: np.ndarray
    window_tokens: int

    @property
    def n_refused(self) -> int:
        """Requests refused (prompt longer than the window)."""
        return int(self.refused.sum())

    @property
    def n_truncated(self) -> int:
        """Requests served with their output cut at the window."""
        return int(self.truncated.sum())


def apply_context_window(prompt_tokens: np.ndarray, output_tokens: np.ndarray, window_tokens: int) -> ContextOutcome:
    """The engine's over-context rule (module docstring) for requests of ``prompt_tokens`` / ``output_tokens``
    against a ``window_tokens`` window (shapes (n,), tokens)."""
    p = np.asarray(prompt_tokens, dtype=np.int64)
    o = np.asarray(output_tokens, dtype=np.int64)
    refused = p > window_tokens
    room = np.maximum(window_tokens - p, 1)
    served = np.where(refused, o, np.minimum(o, room))
    truncated = ~refused & (served < o)
    return ContextOutcome(refused, served, truncated, int(window_tokens))


def context_note(refused: int, truncated: int, window_tokens: int, total: int | None = None) -> str | None:
    """One sentence with both counts, the same wherever they are reported (None when both are 0)."""
    if not refused and not truncated:
        return None
    of = f" of {total:,}" if total is not None else ""
    parts = []
    if refused:
        parts.append(f"{refused:,}{of} request{'s' if refused != 1 else ''} refused (prompt longer than the window)")
    if truncated:
        parts.append(f"{truncated:,}{of} output{'s' if truncated != 1 else ''} cut at the window")
    return f"context window {window_tokens:,} tokens: " + "; ".join(parts)


def served_workload(workload: Workload, window_tokens: int, model_name: str) -> tuple[Workload, str | None]:
    """``workload`` as the engine serves it: refused requests left out, outputs cut at the window, both counts in
    its ``over_context`` (with the whole trace's request count and rate); and the note with both counts (None when
    neither happens).

    Raises:
        InputError: every request is refused.
    """
    ctx = apply_context_window(workload.prompt_tokens, workload.output_tokens, window_tokens)
    if ctx.refused.all():
        raise InputError(
            f"every request's prompt is longer than {model_name}'s {window_tokens:,}-token context window",
            "vLLM refuses a prompt longer than max_model_len",
            "use a model with a longer context or a trace of shorter prompts",
        )
    note = context_note(ctx.n_refused, ctx.n_truncated, window_tokens, workload.n_requests)
    if note is None:
        return workload, None
    keep = ~ctx.refused
    served = replace(
        workload,
        prompt_tokens=workload.prompt_tokens[keep],
        output_tokens=ctx.output_tokens[keep],
        class_labels=workload.labels_at(keep),
        arrival_s=None if workload.arrival_s is None else workload.arrival_s[keep],
        over_context={
            "requests_total": workload.n_requests,
            "refused": ctx.n_refused,
            "truncated": ctx.n_truncated,
            "window_tokens": int(window_tokens),
            "arrival_rate_per_s": None
            if workload.arrival_rate_per_s is None
            else round(float(workload.arrival_rate_per_s), 4),
        },
        prefix_blocks=None if workload.prefix_blocks is None else workload.prefix_blocks.take(np.nonzero(keep)[0]),
    )
    return served, f"{model_name}'s {note}; the plan sizes for the requests as served"


__all__ = ["ContextOutcome", "apply_context_window", "context_note", "served_workload"]
