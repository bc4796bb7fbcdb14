"""Links of an instance: where its GPUs sit on nodes (:func:`node_layout`) and the seconds of one step's
collectives over NVLink and the scale-out network (:func:`communication_s`), for the step model of
:mod:`hetplan.perf.closed_loop`.

A node is the GPU's NVLink domain (``scale_up_gpus``). A TP group larger than a node runs its ring all-reduce at the
slower of NVLink and the scale-out network (the catalog's ``network_gbit_per_s`` per GPU, at
:data:`NETWORK_EFFICIENCY`), plus :data:`INTER_NODE_LATENCY_S` per node hop of the ring (``2 (nodes - 1)``); the MoE
all-to-all of ``tp x dp`` GPUs over several nodes sends the share of tokens bound off the node over the network while
the on-node share goes over NVLink (the slower of the two sets the time); PP hand-offs between stages on different
nodes cross the network.

Source: hetplan's own reconstruction (ring all-reduce and all-to-all alpha-beta costs; latencies after
AIConfigurator's system files).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hetplan.perf.closed_loop import Rows

NETWORK_EFFICIENCY = 0.7
"""Achieved share of the scale-out NIC bandwidth (``network_gbit_per_s``) in collectives across nodes: the default
of :attr:`hetplan.perf.settings.PerfSettings.network_efficiency` (NCCL's multi-node all-reduce bus bandwidth on
400 Gbit/s InfiniBand per GPU is about 40-45 of the 50 GB/s; hetplan's assumption, not fitted: the kernel tables
hold no multi-node collective)."""
INTER_NODE_LATENCY_S = 1e-5
"""One-way latency of one inter-node hop of a collective or hand-off, seconds (the ``p2p_latency`` of AIConfigurator's
system files, ``shared/data/measured/kernels/systems/*.yaml``: 10 us)."""
PP_LINK_LATENCY_S = 5e-5
"""Latency of one pipeline-stage hand-off inside a node, seconds (the default of
:attr:`hetplan.perf.settings.PerfSettings.pp_link_latency_s`)."""


def node_layout(tp: int, dp: int, pp: int, node_gpus: int) -> tuple[int, int, int]:
    """(nodes the whole instance spans, nodes one TP group spans, PP hand-offs that cross nodes) of an instance of
    ``tp x dp x pp`` GPUs placed in order (TP innermost, then DP, then PP stages) on nodes of ``node_gpus`` GPUs.

    A stage of ``tp x dp`` GPUs larger than a node starts on a fresh node, so every hand-off between such stages
    crosses; smaller stages pack ``node_gpus // (tp x dp)`` to a node and only the hand-offs between nodes cross."""
    stage = tp * dp
    per_node = max(node_gpus, 1)
    nodes = -(-stage * pp // per_node)
    tp_nodes = -(-tp // per_node)
    if stage >= per_node:
        crossing = pp - 1
    else:
        crossing = -(-pp // (per_node // stage)) - 1
    return int(nodes), int(tp_nodes), int(crossing)


def communication_s(
    r: Rows, per_rank: np.ndarray, k: np.ndarray, moe: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Seconds of one step's collectives (module docstring), as (TP all-reduces, MoE all-to-all, PP hand-offs): the
    TP all-reduces (two per layer), the MoE dispatch and combine across the ``tp x dp`` GPUs (two per MoE layer) and
    the PP hand-offs, for ``per_rank`` tokens on the busiest attention-DP rank and ``k`` experts per token (0 for
    dense rows, ``moe`` False); arrays broadcast over rows. Links that cross nodes run at the scale-out network's
    ``net_bytes_per_s`` and add :data:`INTER_NODE_LATENCY_S` per hop; inside one node the figures are the
    single-node model's, to the bit."""
    link = r.link_bytes_per_s * r.link_efficiency
    net = r.net_bytes_per_s
    # the TP ring: at the slowest link it crosses, one inter-node hop per node boundary in each of its two phases
    tp_link = np.where(r.tp_nodes > 1, np.minimum(link, net), link)
    tp_hops = 2.0 * (r.tp_nodes - 1.0) * INTER_NODE_LATENCY_S
    ar_one = r.allreduce_latency_s + tp_hops + 2.0 * (r.tp - 1) / r.tp * per_rank * r.d_model * 2.0 / tp_link
    ar = np.where(r.tp > 1, 2.0 * r.layers * ar_one, 0.0)
    # the all-to-all: each rank sends its tokens' k copies to the other GPUs, those on its node over NVLink, the
    # others over the network, at once
    one_node = r.allreduce_latency_s + per_rank * k * r.d_model * (r.gpus - 1) / r.gpus / link
    sent = per_rank * k * r.d_model / r.gpus
    off_node = np.maximum(r.gpus - r.node_gpus, 0.0)
    on_node = np.minimum(r.gpus, r.node_gpus) - 1.0
    nodes = r.allreduce_latency_s + INTER_NODE_LATENCY_S + np.maximum(sent * on_node / link, sent * off_node / net)
    a2a_one = np.where(off_node > 0, nodes, one_node)
    a2a = np.where(moe & (r.gpus > r.tp), 2.0 * r.moe_layers * a2a_one, 0.0)
    # PP: the busiest rank's activations (16-bit) pass to the next stage, over the network where stages change node
    act = per_rank * r.d_model * 2.0
    inside = np.maximum(r.pp - 1.0 - r.pp_cross, 0.0) * (PP_LINK_LATENCY_S + act / link)
    across = r.pp_cross * (PP_LINK_LATENCY_S + INTER_NODE_LATENCY_S + act / net)
    handoff: np.ndarray = inside + across
    return ar, a2a, handoff


__all__ = [
    "INTER_NODE_LATENCY_S",
    "NETWORK_EFFICIENCY",
    "PP_LINK_LATENCY_S",
    "communication_s",
    "node_layout",
]
