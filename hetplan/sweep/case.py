"""One sweep case as a task: plan it, simulate it when it has a trace, and return the plan document or the error.

:func:`run_case` runs in a worker (a local pool process or a Ray worker) and never raises for a case's own
failure: an infeasible target, a missing price or a bug all come back as a :class:`CaseOutcome` with ``status``
``infeasible`` or ``error`` and one line of text, so one bad case does not stop the sweep.

Files on Ray: a worker on another machine may not see the driver's files, so the driver ships each file's bytes
(the trace, the price file, a ``config.json``) and the catalog through Ray's object store
(:meth:`hetplan.executors.Executor.share`); :func:`run_case` writes them once into a per-content cache folder
(``$TMPDIR/hetplan-files/<sha256>/<file name>``, the file name kept, since the plan records the workload by its file
name and hash) and plans from there. A ``config.json`` model's path in the plan is set back to the driver's path,
so the plan document is the same on every executor.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import hashlib
import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan import __version__
from hetplan.errors import HetplanError, InfeasibleError, OutOfMemoryError
from hetplan.io import write_atomic

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog
    from hetplan.solvers.milp import SolveSettings


@dataclass(frozen=True)
class CaseTask:
    """What a worker needs for one case (plain data, picklable).

    Attributes:
        case_id / inputs_sha256: the case's id and inputs hash (recorded in the plan under ``sweep_case``).
        axes: (axis, label) pairs, recorded in the plan. scenario / base_dir: the scenario's fields and folder.
        strategy / analysis / verify / policy: plan options.
        files: absolute paths, in the order of the file contents passed to :func:`run_case` (empty: read locally).
        catalog_sha256: the driver's catalog hash, when a catalog is passed along.
        catalog_dir: the driver's catalog folder (local workers build their
            :class:`~hetplan.catalog.context.Catalog` from it: a worker process does not share the driver's).
        driver_version: the driver's hetplan version (a worker with another version refuses the case).
        solve: how the case's MILPs run (:class:`hetplan.solvers.milp.SolveSettings`; None: its defaults).
    """

    case_id: str
    inputs_sha256: str
    axes: tuple[tuple[str, str], ...]
    scenario: dict[str, Any]
    base_dir: str
    strategy: str
    analysis: bool
    verify: bool
    policy: str
    files: tuple[str, ...] = ()
    catalog_sha256: str | None = None
    catalog_dir: str | None = None
    driver_version: str = __version__
    solve: SolveSettings | None = None


@dataclass(frozen=True)
class CaseOutcome:
    """A case's result: ``status`` ``ok`` (with the plan document ``doc``), ``infeasible`` or ``error`` (with
    ``error``, one line); seconds spent planning and verifying; ``worker`` is ``host:pid``."""

    case_id: str
    status: str
    doc: dict[str, Any] | None = None
    error: str | None = None
    plan_s: float | None = None
    verify_s: float | None = None
    worker: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, HetplanError):
        return exc.what + (f" ({exc.why})" if exc.why else "")
    return f"internal error: {type(exc).__name__}: {exc}"


def _cache_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"hetplan-files-{os.getuid() if hasattr(os, 'getuid') else 0}"


def _write_once(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` unless it is there (through a temporary file and a rename: workers may race)."""
    if path.is_file():
        return
    write_atomic(path, data, force=True)


def _materialise(name: str, data: bytes) -> str:
    """``data`` as a file called ``name`` in the content cache; returns its path."""
    path = _cache_dir() / hashlib.sha256(data).hexdigest() / name
    _write_once(path, data)
    return str(path)


_CATALOGS: dict[str, Catalog] = {}  # a worker's catalogs by folder, so its cases share the loaded files


def use_catalog(catalog: dict[str, bytes] | None, sha: str | None, folder: str | None = None) -> Catalog:
    """The :class:`~hetplan.catalog.context.Catalog` a case is planned with: the driver's catalog files ``catalog``
    (Ray; relative names, ``perf/<engine>.yaml`` included), written to a cached copy unless this worker's shipped
    catalog has the hash ``sha``, or the driver's ``folder`` (local workers); the shipped catalogs when neither is
    given. The case passes it to :mod:`hetplan.api` (``catalog=``); no environment variable is set and nothing
    process-wide is changed.

    Raises:
        CatalogError: the folder is not a catalog folder (a driver's folder removed while the sweep ran).
    """
    from hetplan.catalog.context import Catalog

    shipped = Catalog.shipped()
    if catalog and sha is not None:
        if shipped.sha256 == sha:
            return shipped
        target = _cache_dir() / f"catalog-{sha}"
        for name, data in catalog.items():
            _write_once(target / name, data)
        folder = str(target)
    if folder is None or Path(folder) == shipped.folder:
        return shipped
    if folder not in _CATALOGS:
        _CATALOGS[folder] = Catalog.from_folder(Path(folder), "the sweep driver's catalog folder")
    return _CATALOGS[folder]


def _relocate(scenario: dict[str, Any], moved: dict[str, str]) -> dict[str, Any]:
    doc = dict(scenario)
    work = doc.get("workload")
    if isinstance(work, dict) and work.get("path") in moved:
        doc["workload"] = {**work, "path": moved[work["path"]]}
    for key in ("prices", "model"):
        if doc.get(key) in moved:
            doc[key] = moved[doc[key]]
    return doc


def run_case(task: CaseTask, catalog: dict[str, bytes] | None = None, *contents: bytes) -> CaseOutcome:
    """Plan ``task``'s scenario (and simulate it at its target when ``task.verify``); see the module docstring.

    ``catalog`` (file name -> bytes) and ``contents`` (one per ``task.files``) are given on Ray only.
    Never raises for the case's own failures; returns a :class:`CaseOutcome`.
    """
    from hetplan import api
    from hetplan.budget import command_budget
    from hetplan.resources import Resources
    from hetplan.scenario import Scenario

    worker = f"{socket.gethostname()}:{os.getpid()}"
    if task.driver_version != __version__:
        return CaseOutcome(task.case_id, "error", error=f"the worker runs hetplan {__version__}, the driver "
                           f"{task.driver_version}: install the same version on every node", worker=worker)  # fmt: skip
    start = time.perf_counter()
    try:
        chosen = use_catalog(catalog, task.catalog_sha256, task.catalog_dir)
        moved = {p: _materialise(Path(p).name, data) for p, data in zip(task.files, contents, strict=True)}
        scenario = Scenario.model_validate(_relocate(task.scenario, moved)).with_base_dir(task.base_dir)
        # the sweep already runs a case per core: no second level of processes
        plan = api.plan(scenario, task.strategy, task.analysis, resources=Resources(plan_workers=1), solve=task.solve,
                        catalog=chosen)  # fmt: skip
    except (InfeasibleError, OutOfMemoryError) as exc:
        return CaseOutcome(task.case_id, "infeasible", error=_one_line(exc),
                           plan_s=time.perf_counter() - start, worker=worker)  # fmt: skip
    except Exception as exc:  # a bad input or a bug: the case's row says so, the sweep goes on
        return CaseOutcome(task.case_id, "error", error=_one_line(exc),
                           plan_s=time.perf_counter() - start, worker=worker)  # fmt: skip
    plan_s = time.perf_counter() - start
    verify_s = None
    verify_error = None
    if task.verify:
        start = time.perf_counter()
        try:
            with command_budget():  # each case's check has the whole budget of simulated work (hetplan.budget)
                plan = api.verify(plan, scenario, task.policy, catalog=chosen)
        except Exception as exc:  # the plan stands; the row says the check failed and why
            verify_error = _one_line(exc)
        verify_s = time.perf_counter() - start
    doc = api.to_doc(plan)
    back = {v: k for k, v in moved.items()}
    if doc["scenario"].get("model_config") in back:
        doc["scenario"]["model_config"] = back[doc["scenario"]["model_config"]]
    record: dict[str, Any] = {"id": task.case_id, "inputs_sha256": task.inputs_sha256, "axes": dict(task.axes),
                              "policy": task.policy, "verify": task.verify}  # fmt: skip
    if verify_error is not None:
        record["verify_error"] = verify_error
    doc["sweep_case"] = record
    return CaseOutcome(task.case_id, "ok", doc=doc, plan_s=plan_s, verify_s=verify_s, worker=worker)


__all__ = ["CaseOutcome", "CaseTask", "run_case", "use_catalog"]
