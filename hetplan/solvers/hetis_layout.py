"""Hetis primary-worker layouts (DESIGN §3.3): the pool's devices ranked into compute tiers, TP groups inside one
link domain, and every DP × PP × TP layout over the top tiers whose weights fit. The search over these layouts is
:mod:`hetplan.solvers.hetis`, their evaluation :mod:`hetplan.solvers.hetis_eval`.

Source: Hetis (Mo et al., SC '25) for the layouts (primary sets from the strongest tier down, TP inside one
NVLink/PCIe domain, PP layers split in proportion to stage speed, a layout feasible when weights/(pp·tp) plus
activations fit); tiers by dense TFLOPS and TP groups fastest first are hetplan's own reconstruction (see
:mod:`hetplan.solvers.hetis`).
"""

from __future__ import annotations

from dataclasses import dataclass

from hetplan.catalog.schemas import GpuSpec
from hetplan.perf.arch import ModelArch
from hetplan.pool import Device, Pool
from hetplan.solvers.hetis_model import (
    HetisSettings,
    device_speed,
    free_kv_gib,
    group_gpu,
    group_label,
    split_layers,
    weights_gib,
)

TP_OPTIONS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: a TP group (devices of one domain) holding ``layers`` layers."""

    devices: tuple[Device, ...]
    layers: int

    @property
    def tp(self) -> int:
        return len(self.devices)

    @property
    def gpu(self) -> GpuSpec:
        """The group's spec: the slowest member's, every figure at the group's minimum (:func:`group_gpu`)."""
        return group_gpu([d.gpu for d in self.devices])

    @property
    def label(self) -> str:
        """GPU types of the group (``A+B`` when mixed)."""
        return group_label([d.gpu for d in self.devices])


@dataclass(frozen=True)
class Layout:
    """Primary workers: ``dp`` replicas, each a pipeline of stages (``pp`` stages of ``tp`` GPUs)."""

    replicas: tuple[tuple[Stage, ...], ...]

    @property
    def dp(self) -> int:
        return len(self.replicas)

    @property
    def pp(self) -> int:
        return len(self.replicas[0])

    @property
    def tp(self) -> int:
        return self.replicas[0][0].tp

    @property
    def devices(self) -> tuple[Device, ...]:
        return tuple(d for rep in self.replicas for st in rep for d in st.devices)

    def label(self) -> str:
        return f"DP{self.dp} x PP{self.pp} x TP{self.tp}"


def tiers(pool: Pool, arch: ModelArch) -> list[tuple[float, list[Device]]]:
    """Devices grouped by dense compute (TFLOPS, measured where given), strongest first; devices that cannot run
    the model's GEMMs (speed 0) are left out."""
    groups: dict[float, list[Device]] = {}
    for d in pool.devices:
        speed = device_speed(arch, d)
        if speed > 0:
            groups.setdefault(round(speed, 6), []).append(d)
    return sorted(groups.items(), key=lambda x: -x[0])


def _tp_groups(devices: list[Device], tp: int, arch: ModelArch) -> list[tuple[Device, ...]]:
    """TP groups of ``tp`` devices inside one domain, fastest members together; fastest groups first."""
    by_domain: dict[int, list[Device]] = {}
    for d in devices:
        by_domain.setdefault(d.domain, []).append(d)
    groups = []
    for dom in sorted(by_domain):
        members = sorted(by_domain[dom], key=lambda d: (-device_speed(arch, d), -d.gpu.hbm_gb_per_s, d.name))
        for i in range(0, len(members) - tp + 1, tp):
            groups.append(tuple(members[i : i + tp]))
    return sorted(groups, key=lambda g: (-min(device_speed(arch, d) for d in g), g[0].name))


def _fits(arch: ModelArch, stage: Stage, settings: HetisSettings) -> bool:
    fraction = stage.layers / arch.layers
    return all(free_kv_gib(d.gpu, weights_gib(arch, stage.tp, fraction), settings.perf) > 0 for d in stage.devices)


def enumerate_layouts(pool: Pool, arch: ModelArch, settings: HetisSettings) -> list[Layout]:
    """Every distinct DP × PP × TP layout over primary sets made of the top-k tiers (k = 1, 2, ...), whose
    weights fit (see module docstring). Deterministic order."""
    seen: set[tuple[tuple[tuple[str, ...], ...], ...]] = set()
    out: list[Layout] = []
    ranked = tiers(pool, arch)
    for k in range(1, len(ranked) + 1):
        members = [d for _, devs in ranked[:k] for d in devs]
        for tp in TP_OPTIONS:
            if arch.attention_heads % tp:
                continue
            groups = _tp_groups(members, tp, arch)
            for pp in range(1, min(settings.max_pp, len(groups), arch.layers) + 1):
                for dp in range(1, len(groups) // pp + 1):
                    chosen = groups[: dp * pp]
                    reps: list[list[tuple[Device, ...]]] = [[] for _ in range(dp)]
                    for i, g in enumerate(chosen):  # snake order balances the replicas
                        row = i % (2 * dp)
                        reps[row if row < dp else 2 * dp - 1 - row].append(g)
                    replicas = []
                    for rep in reps:
                        speeds = [len(g) * min(device_speed(arch, d) for d in g) for g in rep]
                        layers = split_layers(arch.layers, speeds)
                        replicas.append(tuple(Stage(g, n) for g, n in zip(rep, layers, strict=True)))
                    key = tuple(tuple(tuple(d.name for d in st.devices) for st in rep) for rep in replicas)
                    if key in seen:
                        continue
                    seen.add(key)
                    if all(_fits(arch, st, settings) for rep in replicas for st in rep):
                        out.append(Layout(tuple(replicas)))
    return out
