"""Routing requests across a deployment's groups (combos with all their copies, or aggregated instance types).

Every router decides from what a real router sees: the request's prompt length (never its output length) and,
for ``jsq``, the groups' load. The candidates and weights come from the deployment's prompt-length rule table
(:mod:`hetplan.routing`, the same table ``hetplan emit`` writes as ``routing.json``): for Cauchy and homogeneous
plans every combo, weighted by its planned goodput (all copies); for Mélange and mixed plans the units serving the
prompt's range, weighted by their shares of it summed over the MILP's output buckets (prompts outside every range
go over all units, weighted by traffic share).

- ``round-robin``: smooth weighted round-robin (nginx's algorithm: deterministic, spreads each group's turns
  evenly), one counter set per prompt range (:class:`hetplan.routing.WeightedRoundRobin`).
- ``jsq``: join the shortest queue on up-to-date state, normalised: the group with the fewest outstanding
  requests (routed and not finished) per unit of weight.
- ``random``: weighted random choice from an explicit seed (the simulator's only random choice).
- ``prefix``: locality for prefix caching (:mod:`hetplan.sim.prefix`), scored as llm-d's endpoint picker combines
  its prefix-cache scorer (the share of the request's prefix blocks an endpoint holds, 0..1) with a load scorer
  at equal weights: each candidate group scores ``cached blocks / prompt blocks − load / max load`` (load:
  outstanding requests per unit of weight, as ``jsq``), the highest wins (ties: the lower index). It sees the
  prompt's block ids and which are cached on each group's prefill instances, as a precise-prefix router does.
  Inside the group the same score picks the prefill instance and binds the request to it when that instance
  holds part of the prefix (:func:`hetplan.sim.arrival.pin_prefix`); otherwise it waits in the group's shared queue
  as with the other routers.

Inside a group dispatch is work conserving: each role's instances serve one shared queue, so a request starts on
the first instance of its role that can admit it (:mod:`hetplan.sim.dispatch`); the router's choice only matters
between groups (except ``prefix``, below).

Source: hetplan's own reconstruction (Cauchy routes by combo goodput; Mélange's size buckets as prompt ranges).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hetplan.errors import InputError
from hetplan.routing import RoutingTable, WeightedRoundRobin
from hetplan.sim.hostkv import HostKvTier

ROUTERS = ("round-robin", "jsq", "random", "prefix")


@dataclass(frozen=True)
class SimConfig:
    """Settings of one simulation run.

    Attributes:
        router: ``round-robin``, ``jsq``, ``random`` or ``prefix`` (needs prefix caching).
        seed: seed of the ``random`` router (the only random choice).
        chunked_prefill: split long prompts across iterations (vLLM V1's default).
        drain_s: simulated seconds allowed after the last arrival; requests still unfinished then are misses.
        host_kv: a host KV tier every policy offloads preempted KV to (:mod:`hetplan.sim.hostkv`); None (the
            default): preempted KV is dropped and recomputed (CASCADE then uses its own settings' tier). Prefix
            blocks evicted from HBM spill to the same tier (:mod:`hetplan.sim.prefix`).
        prefix_cache: prefix caching on (when the stream has prefix blocks).
        prefix_hbm_blocks: cap on an instance's HBM prefix-cache blocks (None: the KV room left only).
    """

    router: str = "round-robin"
    seed: int = 0
    chunked_prefill: bool = True
    drain_s: float = 3600.0
    host_kv: HostKvTier | None = None
    prefix_cache: bool = True
    prefix_hbm_blocks: int | None = None

    def __post_init__(self) -> None:
        if self.router not in ROUTERS:
            raise InputError(f"unknown router {self.router!r}", f"known: {', '.join(ROUTERS)}", "pick one of them")
        if not self.drain_s > 0:
            raise InputError(f"drain_s must be > 0, got {self.drain_s}", fix="pass a positive drain time")
        if self.prefix_hbm_blocks is not None and self.prefix_hbm_blocks < 0:
            raise InputError(f"prefix_hbm_blocks must be >= 0, got {self.prefix_hbm_blocks}", fix="e.g. 1024 or None")


class Router:
    """Picks a group for each request from its prompt length only (see the module docstring): the deployment's
    rule table (:mod:`hetplan.routing`) gives the candidate groups and weights of the prompt's range.

    Attributes:
        outstanding: per group, requests routed there and not yet finished (the engine keeps it current).
    """

    def __init__(self, table: RoutingTable, name: str, seed: int) -> None:
        self.table = table
        self.name = name
        self.rng = random.Random(seed)
        self.outstanding = [0] * len(table.units)
        self._rr = WeightedRoundRobin(table)

    def snapshot(self) -> tuple[dict[int, list[float]], object]:
        """The state that decides the next picks of ``round-robin`` and ``random`` (they do not depend on the
        load): the smooth round-robin counters and the random generator's state."""
        return {k: list(v) for k, v in self._rr.state.items()}, self.rng.getstate()

    def restore(self, state: tuple[dict[int, list[float]], object]) -> None:
        """Continue from a :meth:`snapshot` (``hetplan simulate --windows`` starts each window where one long run
        would be)."""
        rr, rng = state
        self._rr.state = {k: list(v) for k, v in rr.items()}
        self.rng.setstate(rng)  # type: ignore[arg-type]

    def pick(self, prompt_tokens: int) -> int:
        """Index of the group for a request of ``prompt_tokens`` (its output length is not known to a router)."""
        index = self.table.range_index(prompt_tokens)
        if self.name == "round-robin":
            return self._rr.pick(index)
        weights = self.table.weights(index)
        cands = [k for k, w in enumerate(weights) if w > 0] if index >= 0 else list(range(len(weights)))
        if len(cands) == 1:
            return cands[0]
        ws = [weights[k] for k in cands]
        if self.name == "jsq":
            k = min(range(len(cands)), key=lambda i: (self.outstanding[cands[i]] / max(ws[i], 1e-9), cands[i]))
            return cands[k]
        return self.rng.choices(cands, weights=ws)[0]

    def pick_prefix(self, prompt_tokens: int, cached_blocks: list[int], prompt_blocks: int) -> int:
        """The ``prefix`` router's group for a prompt of ``prompt_tokens`` (``prompt_blocks`` full blocks) with
        ``cached_blocks[k]`` of its leading blocks cached on group k (module docstring)."""
        index = self.table.range_index(prompt_tokens)
        weights = self.table.weights(index)
        cands = [k for k, w in enumerate(weights) if w > 0] if index >= 0 else list(range(len(weights)))
        if len(cands) == 1:
            return cands[0]
        load = [self.outstanding[k] / max(weights[k], 1e-9) for k in cands]
        top = max(max(load), 1e-9)
        whole = max(prompt_blocks, 1)
        score = [cached_blocks[k] / whole - load[i] / top for i, k in enumerate(cands)]
        best = max(range(len(cands)), key=lambda i: (score[i], -cands[i]))
        return cands[best]


__all__ = ["ROUTERS", "Router", "SimConfig"]
