"""The catalog a plan is made with, as one value: :class:`Catalog` (GPUs, models, prices, the fitted engine
curves and the GPU entries of ``--profile`` files), whose :attr:`Catalog.sha256` is the plan's
``provenance.catalog_sha256``.

Who chooses it: the CLI builds one from ``HETPLAN_CATALOG_DIR`` (:mod:`hetplan.cli.app`, the one place that reads
the variable), a sweep worker from the folder the driver gives it (:mod:`hetplan.sweep.case`), an API caller its
own (:meth:`Catalog.from_folder`); each passes it to :mod:`hetplan.api` (``catalog=``). Library code never reads
the environment.

How it reaches the code below the API: as an argument. :func:`hetplan.planning.request.build_request` takes it
and the :class:`~hetplan.solvers.cauchy.PlanRequest` it builds carries it (``req.catalog``) to the solvers and the
performance model (:class:`hetplan.perf.latency.InstanceModel`'s ``catalog``); the simulator
(:class:`hetplan.sim.run.SimRequest`'s ``catalog``, :func:`hetplan.sim.deployment.deployment_from_plan`),
``estimate``, the calibration readers, profile matching, pool files, a version-1 plan's upgrade and the sweep's
workers (:class:`hetplan.sweep.run.SweepSettings`) take it the same way; where such a parameter is left at None
the shipped catalogs are meant. There is no process-wide "catalog in use". A value pickles as its folder and
overlay (a worker process reads the files again). Each value loads its files once,
on first use, and keeps them (a new value reads them afresh: an edited or refitted folder is read again when a new
:class:`Catalog` is built from it).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hetplan.catalog.files import read_yaml_file
from hetplan.catalog.schemas import GpuCatalog, GpuSpec, ModelCatalog, ModelSpec, PriceCatalog, PriceEntry
from hetplan.errors import CatalogError, InputError

CATALOG_FILES = ("gpus.yaml", "models.yaml", "prices.yaml")
"""The catalog files proper, in the order :attr:`Catalog.sha256` hashes them; a user catalog folder holds all
three."""

SHIPPED_FOLDERS = (
    Path(__file__).resolve().parents[1] / "_catalogs",  # in the wheel
    Path(__file__).resolve().parents[1].parent / "catalogs",  # a source checkout or an editable install
)
"""Where the shipped catalogs are looked for, in order."""


class _Loaded:
    """A folder's files, loaded on first use; shared by a :class:`Catalog` and its overlays."""

    __slots__ = ("files_hash", "gpus", "models", "perf", "prices")

    def __init__(self) -> None:
        self.gpus: GpuCatalog | None = None
        self.models: ModelCatalog | None = None
        self.prices: PriceCatalog | None = None
        self.perf: dict[str, dict[str, Any] | None] = {}
        self.files_hash: Any = None  # hashlib object over the folder's files (copied per overlay)


@dataclass(frozen=True, eq=False)
class Catalog:
    """The catalog folder ``folder`` (``gpus.yaml``, ``models.yaml``, ``prices.yaml``, ``perf/<engine>.yaml``; an
    engine the folder does not fit takes the shipped curves) and ``overlay``: the GPU entries of ``--profile``
    files, each replacing the catalog entry of its name (new names follow the catalog's).

    Build it with :meth:`shipped` or :meth:`from_folder`; :meth:`with_overlay` adds profiled GPUs and shares the
    loaded files. Values compare by identity (two values of one folder may hold files read at different times).
    """

    folder: Path
    overlay: tuple[GpuSpec, ...] = ()
    _loaded: _Loaded = field(default_factory=_Loaded, repr=False)

    @classmethod
    def shipped(cls) -> Catalog:
        """The catalogs shipped with hetplan (one value per process).

        Raises:
            CatalogError: no shipped catalog folder can be found (a broken install).
        """
        if not _SHIPPED:
            for folder in SHIPPED_FOLDERS:
                if (folder / "gpus.yaml").is_file():
                    _SHIPPED.append(cls(folder))
                    break
            else:
                raise CatalogError(
                    "cannot find hetplan's catalogs",
                    f"looked in: {', '.join(str(c) for c in SHIPPED_FOLDERS)}",
                    "reinstall hetplan (pip install .) or set HETPLAN_CATALOG_DIR to a folder with gpus.yaml",
                )
        return _SHIPPED[0]

    @classmethod
    def from_folder(cls, folder: Path | str | None, named_by: str = "the catalog folder") -> Catalog:
        """The catalog in ``folder`` (None: :meth:`shipped`), its files read on first use. ``named_by`` names
        where ``folder`` came from in the error (``HETPLAN_CATALOG_DIR``).

        Raises:
            CatalogError: ``folder`` is not a folder, or lacks one of :data:`CATALOG_FILES` (named).
        """
        if folder is None:
            return cls.shipped()
        folder = Path(folder)
        missing = [name for name in CATALOG_FILES if not (folder / name).is_file()]
        if not folder.is_dir() or missing:
            raise CatalogError(
                f"{named_by} ({folder}) is not a hetplan catalog folder",
                "the folder does not exist" if not folder.is_dir() else f"it lacks {', '.join(missing)}",
                f"point {named_by} at a folder holding {', '.join(CATALOG_FILES)} (hetplan profile merge --out "
                "writes one), or leave it unset for the shipped catalogs",
            )
        return cls(folder)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its folder and overlay: a worker process (a sweep case, a simulation window) reads the files
        again, on first use."""
        return (Catalog, (self.folder, self.overlay))

    def with_overlay(self, overlay: Sequence[GpuSpec]) -> Catalog:
        """This catalog with ``overlay``'s GPU entries (a ``--profile`` file's measured GPUs) in place of its own
        (the loaded files are shared)."""
        overlay = tuple(overlay)
        return self if overlay == self.overlay else Catalog(self.folder, overlay, self._loaded)

    @property
    def gpu_catalog(self) -> GpuCatalog:
        """``gpus.yaml``, validated (without the overlay).

        Raises:
            CatalogError / InputError: the file is unreadable or does not match its schema (see
                :func:`hetplan.catalog.files.read_yaml_file`).
        """
        gpus = self._loaded.gpus
        if gpus is None:
            gpus = self._loaded.gpus = read_yaml_file(self.folder / "gpus.yaml", GpuCatalog, "GPU catalog")
        return gpus

    @property
    def models(self) -> ModelCatalog:
        """``models.yaml``, validated (raises as :attr:`gpu_catalog`)."""
        models = self._loaded.models
        if models is None:
            models = self._loaded.models = read_yaml_file(self.folder / "models.yaml", ModelCatalog, "model catalog")
        return models

    @property
    def prices(self) -> PriceCatalog:
        """``prices.yaml``, validated (raises as :attr:`gpu_catalog`)."""
        prices = self._loaded.prices
        if prices is None:
            prices = self._loaded.prices = read_yaml_file(self.folder / "prices.yaml", PriceCatalog, "price catalog")
        return prices

    @property
    def gpus(self) -> tuple[GpuSpec, ...]:
        """The GPU table with the overlay applied: each overlay entry replaces the catalog entry of its name, new
        names follow the catalog's."""
        base = self.gpu_catalog.gpus
        if not self.overlay:
            return base
        by_name = {g.name: g for g in self.overlay}
        known = {g.name for g in base}
        return tuple(by_name.get(g.name, g) for g in base) + tuple(g for g in by_name.values() if g.name not in known)

    def perf_files(self) -> dict[str, Path]:
        """The fitted engine curves in use, ``engine -> path``, sorted by engine: every ``perf/<engine>.yaml`` of
        the folder, and the shipped file of each engine the folder does not fit."""
        return perf_files(self.folder)

    def perf_path(self, engine: str) -> Path:
        """The curves file of ``engine`` (:meth:`perf_files`); the folder's own path, absent, when none has it."""
        return self.perf_files().get(engine) or self.folder / "perf" / f"{engine}.yaml"

    def perf_doc(self, engine: str) -> dict[str, Any] | None:
        """The fitted document of ``engine`` (None when none is shipped), read once per value
        (:func:`hetplan.perf.calibration.read_perf_catalog` checks it).

        Raises:
            CatalogError: the file exists but is not a valid perf catalog.
        """
        try:
            return self._loaded.perf[engine]
        except KeyError:
            from hetplan.perf.calibration import read_perf_catalog

            path = self.perf_path(engine)
            doc = self._loaded.perf[engine] = read_perf_catalog(path) if path.is_file() else None
            return doc

    @property
    def sha256(self) -> str:
        """SHA-256 (hex) over everything in the catalog that decides a plan, recorded in plans so a figure can be
        traced to the catalog that produced it: ``gpus.yaml``, ``models.yaml``, ``prices.yaml`` (in that order),
        then the fitted engine curves in use (:meth:`perf_files`, by engine), each prefixed by its name; then each
        overlay entry's JSON. A refit of one constant in ``perf/`` or a different profile changes the hash."""
        if self._loaded.files_hash is None:
            h = hashlib.sha256()
            named = [(name, self.folder / name) for name in CATALOG_FILES]
            named += [(f"perf/{engine}.yaml", path) for engine, path in self.perf_files().items()]
            for name, path in named:
                h.update(name.encode() + b"\0")
                h.update(path.read_bytes() if path.is_file() else b"")
            self._loaded.files_hash = h
        h = self._loaded.files_hash.copy()
        for spec in self.overlay:
            h.update(b"overlay\0" + spec.model_dump_json(exclude_none=True).encode())
        return str(h.hexdigest())

    def find_gpu(self, name: str) -> GpuSpec:
        """Look a GPU up by name or alias in :attr:`gpus`, ignoring case and punctuation (``h100`` finds
        ``H100-SXM``).

        Raises:
            InputError: unknown name, with suggestions.
        """
        return lookup_gpu(name, self.gpus)

    def find_model(self, name: str) -> ModelSpec:
        """Look a model up by catalog name or Hugging Face repo, or read a ``config.json`` path
        (:func:`hetplan.catalog.hf_config.model_from_hf_config`).

        Raises:
            InputError: unknown name (with suggestions) or an unreadable config file.
        """
        path = Path(name)
        # os.path's checks are False (not an error) for text too long to be a path
        if name.endswith(".json") or os.path.isfile(path) or os.path.isfile(path / "config.json"):
            from hetplan.catalog.hf_config import model_from_hf_config

            return model_from_hf_config(path)
        wanted = _norm(name)
        models = self.models.models
        for model in models:
            if wanted in (_norm(model.name), _norm(model.hf_repo)):
                return model
        hint = _suggest(name, [m.name for m in models])
        raise InputError(
            f"unknown model {name!r}",
            hint or "no catalog model has a similar name",
            "run 'hetplan catalog models', or pass a Hugging Face config.json path to --model",
        )

    def price_rows(self, gpu: GpuSpec) -> list[PriceEntry]:
        """All catalog price rows for ``gpu`` (matched by canonical name)."""
        return [p for p in self.prices.prices if p.gpu == gpu.name]


_SHIPPED: list[Catalog] = []  # Catalog.shipped()'s value, made on first use


def perf_files(folder: Path) -> dict[str, Path]:
    """The fitted engine curves of the catalog folder ``folder``, ``engine -> path``, sorted by engine: its
    ``perf/<engine>.yaml`` files and the shipped file of each engine it does not fit."""
    found: dict[str, Path] = {}
    for place in (*reversed(SHIPPED_FOLDERS), folder):  # later folders win
        perf = place / "perf"
        if perf.is_dir():
            found.update({p.stem: p for p in perf.glob("*.yaml") if p.is_file()})
    return dict(sorted(found.items()))


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.4)]
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def lookup_gpu(name: str, gpus: Sequence[GpuSpec]) -> GpuSpec:
    """Look a GPU up by name or alias in ``gpus``, ignoring case and punctuation.

    Raises:
        InputError: unknown name, with suggestions.
    """
    wanted = _norm(name)
    for gpu in gpus:
        if wanted == _norm(gpu.name) or any(wanted == _norm(a) for a in gpu.aliases):
            return gpu
    names = [g.name for g in gpus] + [a for g in gpus for a in g.aliases]
    hint = _suggest(name, names)
    raise InputError(
        f"unknown GPU {name!r}",
        hint or "no catalog GPU has a similar name",
        "run 'hetplan catalog gpus' to list the known GPUs",
    )


__all__ = ["CATALOG_FILES", "SHIPPED_FOLDERS", "Catalog", "lookup_gpu", "perf_files"]
