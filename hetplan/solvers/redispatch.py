"""Hetis re-dispatch rule: move KV heads of long-lived requests when the head split has drifted (DESIGN §3.3).

As requests grow and finish, the split chosen at admission drifts. The rule, checked between decode steps:

1. **Trigger**: ``max_j t_j / mean_j t_j > θ`` over the devices in use (imbalance), or some device's KV use passes
   ``watermark`` of its KV memory.
2. **Candidates**: heads on the slowest device (imbalance) or on the fullest device (memory), of the requests with
   the most remaining decode steps first (long-lived requests repay a move over more steps).
3. **Accept** moving one KV head of request r from device j to device k when
   ``(makespan before − makespan after) · remaining_steps_r > transfer_s``, with
   ``transfer_s = L_r · bytes_per_head_token / link_bytes_per_s[j][k]`` (the head's KV crosses the link once); for
   the memory trigger the move must keep k under the watermark, and the makespan it adds times the remaining
   steps must not exceed the transfer time (``gain ≥ −transfer_s``).
   The target is the device that gives the lowest makespan after the move. At most ``max_moves`` moves per call.

The step-time model is :func:`hetplan.solvers.headsplit.device_times` at request granularity.

Source: trigger and pay-back rule follow Hetis (SC '25) as DESIGN §3.3 states them; θ and the watermark are
:class:`~hetplan.solvers.hetis_model.HetisSettings` (defaults 1.2 and 0.9, hetplan's guesses; calibrate by
replaying a trace) and the one-head-at-a-time greedy is hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hetplan.solvers.headsplit import AttentionDevice


@dataclass(frozen=True)
class RunningRequest:
    """A decoding request: ``context_tokens`` cached, ``remaining_steps`` decode steps left, and ``heads[j]`` KV
    heads on device j."""

    name: str
    context_tokens: float
    remaining_steps: int
    heads: tuple[int, ...]


@dataclass(frozen=True)
class Move:
    """One KV head of ``request`` moved from device index ``source`` to ``target``; ``gain_s`` is the step-time
    saving times the remaining steps, ``transfer_s`` the KV transfer time, ``trigger`` imbalance or memory."""

    request: str
    source: int
    target: int
    gain_s: float
    transfer_s: float
    trigger: str


def step_times(devices: Sequence[AttentionDevice], requests: Sequence[RunningRequest]) -> list[float]:
    """Per-device step time t_j at request granularity, seconds."""
    out = []
    for j, d in enumerate(devices):
        load = sum(r.heads[j] * (d.s_per_head_token * r.context_tokens + d.s_per_head_request) for r in requests)
        used = any(r.heads[j] for r in requests)
        out.append(load + (d.fixed_s if used else 0.0))
    return out


def memory_use(devices: Sequence[AttentionDevice], requests: Sequence[RunningRequest]) -> list[float]:
    """Share of each device's KV memory in use (head·tokens over capacity)."""
    return [
        sum(r.heads[j] * r.context_tokens for r in requests) / d.kv_capacity_head_tokens
        if d.kv_capacity_head_tokens > 0
        else float("inf")
        for j, d in enumerate(devices)
    ]


def imbalance(times: Sequence[float]) -> float:
    """max t_j / mean t_j over all devices of the split (1 when balanced or all idle)."""
    mean = sum(times) / len(times) if times else 0.0
    return max(times) / mean if mean > 0 else 1.0


def redispatch(
    devices: Sequence[AttentionDevice],
    requests: Sequence[RunningRequest],
    bytes_per_head_token: float,
    link_bytes_per_s: Sequence[Sequence[float]],
    theta: float = 1.2,
    watermark: float = 0.9,
    max_moves: int = 64,
) -> tuple[list[RunningRequest], list[Move]]:
    """Apply the re-dispatch rule (module docstring) and return the new requests and the moves made.

    Args:
        devices: shape (J,), as for the head split.
        requests: the running batch; ``heads`` of each has length J.
        bytes_per_head_token: KV bytes of one head for one token over all layers.
        link_bytes_per_s: shape (J, J), bandwidth between devices, bytes/s.
        theta, watermark: triggers (see :class:`~hetplan.solvers.hetis_model.HetisSettings`).

    Returns:
        ``(requests after the moves, moves)``; no moves when nothing triggers or no move pays for itself.
    """
    reqs = [RunningRequest(r.name, r.context_tokens, r.remaining_steps, tuple(r.heads)) for r in requests]
    moves: list[Move] = []
    n_dev = len(devices)
    for _ in range(max_moves):
        times = step_times(devices, reqs)
        mem = memory_use(devices, reqs)
        if max(mem) > watermark:
            trigger, source = "memory", max(range(n_dev), key=lambda j: (mem[j], -j))
        elif imbalance(times) > theta:
            trigger, source = "imbalance", max(range(n_dev), key=lambda j: (times[j], -j))
        else:
            break
        before = max(times)
        best: tuple[float, int, int, float, float] | None = None  # (after, request index, target, gain, transfer)
        order = sorted(range(len(reqs)), key=lambda i: (-reqs[i].remaining_steps, reqs[i].name))
        for i in order:
            r = reqs[i]
            if not r.heads[source]:
                continue
            for k in range(n_dev):
                if k == source:
                    continue
                heads = list(r.heads)
                heads[source] -= 1
                heads[k] += 1
                trial = (
                    reqs[:i]
                    + [RunningRequest(r.name, r.context_tokens, r.remaining_steps, tuple(heads))]
                    + reqs[i + 1 :]
                )
                if memory_use(devices, trial)[k] > watermark:
                    continue
                after = max(step_times(devices, trial))
                transfer = r.context_tokens * bytes_per_head_token / link_bytes_per_s[source][k]
                gain = (before - after) * r.remaining_steps
                pays = gain > transfer if trigger == "imbalance" else gain >= -transfer
                if pays and (best is None or after < best[0] - 1e-15):
                    best = (after, i, k, gain, transfer)
            if best is not None:
                break  # the longest-lived request with a paying move goes first
        if best is None:
            break
        _, i, k, gain, transfer = best
        r = reqs[i]
        heads = list(r.heads)
        heads[source] -= 1
        heads[k] += 1
        reqs[i] = RunningRequest(r.name, r.context_tokens, r.remaining_steps, tuple(heads))
        moves.append(Move(r.name, source, k, gain, transfer, trigger))
    return reqs, moves
