"""Routing requests across a deployment's groups (combos with all their copies, or aggregated instance types).

- ``round-robin``: smooth weighted round-robin (nginx's algorithm: deterministic, spreads each group's turns
  evenly) over the combos, weights = each combo's planned goodput (all copies), as the planner assumed; for
  Mélange plans over the instance types that serve the request's size bucket, weights = their shares of that
  bucket (requests outside every bucket go over all types, weighted by traffic share).
- ``jsq``: join the shortest queue on up-to-date state, normalised: the group with the fewest outstanding
  requests (routed and not finished) per unit of weight.
- ``random``: weighted random choice from an explicit seed (the simulator's only random choice).

Inside a group dispatch is work conserving: each role's instances serve one shared queue, so a request starts on
the first instance of its role that can admit it (:mod:`hetplan.sim.dispatch`); the router's choice only matters
between groups.

Source: hetplan's own reconstruction (Cauchy routes by combo goodput; Mélange by request-size bucket).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hetplan.errors import InputError
from hetplan.sim.deployment import Group
from hetplan.sim.hostkv import HostKvTier

ROUTERS = ("round-robin", "jsq", "random")


@dataclass(frozen=True)
class SimConfig:
    """Settings of one simulation run.

    Attributes:
        router: ``round-robin``, ``jsq`` or ``random``.
        seed: seed of the ``random`` router (the only random choice).
        chunked_prefill: split long prompts across iterations (vLLM V1's default).
        drain_s: simulated seconds allowed after the last arrival; requests still unfinished then are misses.
        host_kv: a host KV tier every policy offloads preempted KV to (:mod:`hetplan.sim.hostkv`); None (the
            default): preempted KV is dropped and recomputed (CASCADE then uses its own settings' tier).
    """

    router: str = "round-robin"
    seed: int = 0
    chunked_prefill: bool = True
    drain_s: float = 3600.0
    host_kv: HostKvTier | None = None

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise InputError(f"unknown router {self.router!r}", f"known: {', '.join(ROUTERS)}", "pick one of them")
        if not self.drain_s > 0:
            raise InputError(f"drain_s must be > 0, got {self.drain_s}", fix="pass a positive drain time")


class Router:
    """Picks a group for each request (see the module docstring).

    Attributes:
        outstanding: per group, requests routed there and not yet finished (the engine keeps it current).
    """

    def __init__(self, groups: list[Group], aggregated: bool, name: str, seed: int) -> None:
        self.groups = groups
        # size-aware routing: aggregated plans, and mixed plans (whose combos list buckets too)
        self.aggregated = aggregated or any(g.buckets for g in groups)
        self.name = name
        self.rng = random.Random(seed)
        self.outstanding = [0] * len(groups)
        self._rr: dict[tuple[int, ...], list[float]] = {}

    def snapshot(self) -> tuple[dict[tuple[int, ...], list[float]], object]:
        """The state that decides the next picks of ``round-robin`` and ``random`` (they do not depend on the
        load): the smooth round-robin counters and the random generator's state."""
        return {k: list(v) for k, v in self._rr.items()}, self.rng.getstate()

    def restore(self, state: tuple[dict[tuple[int, ...], list[float]], object]) -> None:
        """Continue from a :meth:`snapshot` (``hetplan simulate --windows`` starts each window where one long run
        would be)."""
        rr, rng = state
        self._rr = {k: list(v) for k, v in rr.items()}
        self.rng.setstate(rng)  # type: ignore[arg-type]

    def pick(self, prompt_tokens: int, output_tokens: int) -> int:
        """Index of the group for a request of ``prompt_tokens`` / ``output_tokens``."""
        groups = self.groups
        cands = list(range(len(groups)))
        weights = [g.weight_req_per_s for g in groups]
        if self.aggregated:
            sel = [
                (gi, share)
                for gi, g in enumerate(groups)
                for (plo, phi, olo, ohi, share) in g.buckets
                if plo <= prompt_tokens < phi and olo <= output_tokens < ohi and share > 0
            ]
            if sel:
                cands = [gi for gi, _ in sel]
                weights = [w for _, w in sel]
        if len(cands) == 1:
            return cands[0]
        if self.name == "jsq":
            k = min(range(len(cands)), key=lambda i: (self.outstanding[cands[i]] / max(weights[i], 1e-9), cands[i]))
            return cands[k]
        if self.name == "random":
            return self.rng.choices(cands, weights=weights)[0]
        state = self._rr.setdefault(tuple(cands), [0.0] * len(cands))
        total = sum(weights)
        best = 0
        for k in range(len(cands)):
            state[k] += weights[k]
            if state[k] > state[best]:
                best = k
        state[best] -= total
        return cands[best]


__all__ = ["ROUTERS", "Router", "SimConfig"]
