"""The plan's provenance covers the whole model (issue 29): a refit of the fitted engine curves or a profile
overlay changes ``provenance.catalog_sha256``; the catalog is an explicit value (``Catalog``) the caller passes to
the API, which passes it down (no process-wide "catalog in use"), and a bad ``HETPLAN_CATALOG_DIR`` is an error, not
a silent fall-back to the shipped catalogs (issue 35)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan import api
from hetplan.catalog import context, loader
from hetplan.catalog.context import Catalog
from hetplan.catalog.profile import load_profiles
from hetplan.cli.main import app
from hetplan.errors import CatalogError
from hetplan.perf.calibration import curves_for
from hetplan.scenario import Scenario
from tests.conftest import EXAMPLES, ROOT


def _copy_catalogs(tmp_path: Path) -> Path:
    folder = tmp_path / "catalogs"
    shutil.copytree(ROOT / "catalogs", folder)
    return folder


def _refit_one_constant(folder: Path) -> None:
    """Change one fitted constant of ``perf/vllm.yaml`` (Hopper's ``mbu``) in the last digit."""
    path = folder / "perf" / "vllm.yaml"
    text = path.read_text(encoding="utf-8")
    at = text.index("  Hopper:")
    match = re.compile(r"(    mbu: )([0-9.]+)").search(text, at)
    assert match is not None
    value = match.group(2)
    bumped = value[:-1] + str((int(value[-1]) + 1) % 10)
    path.write_text(text[: match.start(2)] + bumped + text[match.end(2) :], encoding="utf-8")


def test_a_copy_of_the_shipped_catalogs_hashes_the_same(tmp_path):
    assert Catalog.from_folder(_copy_catalogs(tmp_path)).sha256 == Catalog.shipped().sha256 == loader.catalog_sha256()


def _scenario() -> Scenario:
    return Scenario(
        model="Llama-3.1-8B", workload={"path": str(EXAMPLES / "data" / "azure_conv_15min.csv")},
        gpus=["H100", "L4"], cloud="aws", goodput_req_per_s=3.0,
    )  # fmt: skip


def test_a_refit_of_one_perf_constant_changes_the_plans_provenance(tmp_path):
    folder = _copy_catalogs(tmp_path)
    before = Catalog.from_folder(folder)
    before_sha = before.sha256
    hopper_mbu = curves_for("vllm", "Hopper", catalog=before)[0].mbu
    _refit_one_constant(folder)
    refit = Catalog.from_folder(folder)  # a new value reads the folder afresh
    assert curves_for("vllm", "Hopper", catalog=refit)[0].mbu != hopper_mbu  # the plan is made with the refit curves
    plan = api.plan(_scenario(), "cauchy", analysis=False, catalog=refit)
    assert plan.provenance.catalog_sha256 == refit.sha256 != before_sha
    assert loader.catalog_sha256() == Catalog.shipped().sha256  # nothing of the call stays behind


def test_the_api_plans_with_the_catalog_it_is_given(small):
    """The catalog passed decides the plan and its hash."""
    plan = api.plan(_scenario().model_copy(update={"model": "Llama-3-8B"}), "cauchy", analysis=False, catalog=small)
    assert plan.provenance.catalog_sha256 == small.sha256 != Catalog.shipped().sha256
    assert loader.catalog_sha256() == Catalog.shipped().sha256


def test_a_profile_overlay_changes_the_hash(tmp_path):
    from tests.profiler.helpers import write_profile

    profile = write_profile(tmp_path / "h100.yaml", gpu="H100", bf16_tflops=700.0, read_gb_per_s=3000.0)
    specs = load_profiles([profile]).specs
    assert loader.catalog_sha256(specs) != loader.catalog_sha256()
    assert loader.catalog_sha256(specs) == loader.catalog_sha256(specs)


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda tmp: tmp / "absent", "the folder does not exist"),
        (lambda tmp: tmp, "it lacks gpus.yaml, models.yaml, prices.yaml"),
    ],
)
def test_a_bad_catalog_folder_is_refused(tmp_path, make, why):
    with pytest.raises(CatalogError) as info:
        Catalog.from_folder(make(tmp_path), "HETPLAN_CATALOG_DIR")
    assert "HETPLAN_CATALOG_DIR" in info.value.what and info.value.why == why


def test_the_cli_names_the_variable_and_the_missing_file(tmp_path):
    shutil.copy(ROOT / "catalogs" / "gpus.yaml", tmp_path / "gpus.yaml")
    res = CliRunner().invoke(app, ["catalog", "gpus"], env={"HETPLAN_CATALOG_DIR": str(tmp_path)})
    assert res.exit_code == 2
    assert "HETPLAN_CATALOG_DIR" in res.output and "lacks models.yaml, prices.yaml" in res.output
    res = CliRunner().invoke(app, ["catalog", "gpus"], env={"HETPLAN_CATALOG_DIR": ""})
    assert res.exit_code == 0, res.output  # empty: the shipped catalogs


def test_the_cli_reads_the_variable_at_every_command(tmp_path):
    small = Catalog.from_folder(ROOT / "tests" / "fixtures" / "catalog")
    res = CliRunner().invoke(app, ["catalog", "gpus", "--json"], env={"HETPLAN_CATALOG_DIR": str(small.folder)})
    assert res.exit_code == 0 and [g["name"] for g in json.loads(res.stdout)] == [g.name for g in small.gpus]
    res = CliRunner().invoke(app, ["catalog", "gpus", "--json"], env={"HETPLAN_CATALOG_DIR": None})
    assert res.exit_code == 0 and len(json.loads(res.stdout)) == len(Catalog.shipped().gpus) > len(small.gpus)


def test_the_cli_passes_its_catalog_down_and_leaves_nothing_behind(small_catalog, tmp_path):
    """``HETPLAN_CATALOG_DIR`` decides a CLI plan (its hash is the folder's), and a library call after it, which
    names no catalog, plans with the shipped one: there is no process-wide catalog to leak."""
    scenario = tmp_path / "small.yaml"
    scenario.write_text(
        "name: small\nmodel: Llama-3-8B\ncloud: aws\nslo: {ttft: 2s, tpot: 100ms}\n"
        "workload: {synthetic: {class: balanced, rate_per_s: 4.0, requests: 400}}\n",
        encoding="utf-8",
    )
    res = CliRunner().invoke(app, ["plan", str(scenario), "--no-verify", "--no-analysis", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["provenance"]["catalog_sha256"] == Catalog.from_folder(small_catalog).sha256
    assert set(doc["gpus_used"]) <= {g.name for g in Catalog.from_folder(small_catalog).gpus}
    assert not any(hasattr(context, name) for name in ("in_use", "using", "install"))
    assert loader.load_gpus().gpus == Catalog.shipped().gpu_catalog.gpus


def test_a_plan_with_a_profile_hashes_the_profiled_entry_and_uses_it(tmp_path):
    """The profile reaches the planner as an explicit overlay (no context variable) and into the provenance."""
    from tests.profiler.helpers import write_profile

    profile = write_profile(tmp_path / "h100.yaml", gpu="H100", bf16_tflops=700.0, read_gb_per_s=3000.0)
    specs = load_profiles([profile]).specs
    scenario = Scenario(
        model="Llama-3.1-8B", workload={"path": str(EXAMPLES / "data" / "azure_conv_15min.csv")},
        gpus=["H100"], cloud="aws", goodput_req_per_s=3.0,
    )  # fmt: skip
    plan = api.plan(scenario, "cauchy", analysis=False, profiles=[profile])
    assert plan.provenance.catalog_sha256 == loader.catalog_sha256(specs) != loader.catalog_sha256()
    assert plan.gpu("H100-SXM") == specs[0]
    assert loader.find_gpu("H100").measured is None  # nothing of the profile stays behind


def test_the_simulator_times_steps_with_the_catalog_it_is_given(tmp_path):
    """The refit curves reach the simulator's instances through the deployment (``deployment_from_plan``'s
    ``catalog``), not through a process-wide catalog."""
    from hetplan.sim.deployment import deployment_from_plan

    folder = _copy_catalogs(tmp_path)
    _refit_one_constant(folder)
    refit = Catalog.from_folder(folder)
    plan = api.plan(_scenario().model_copy(update={"gpus": ["H100"]}), "homogeneous", analysis=False)
    # H100-PCIe has no kernel-fitted curves of its own: it takes the (refit) Hopper curves
    shipped = deployment_from_plan(plan).model("H100-PCIe", 1)
    mine = deployment_from_plan(plan, refit).model("H100-PCIe", 1)
    assert mine.catalog is refit and shipped.catalog is None
    assert float(mine.decode_step_latency_s(64, 2048.0)) != float(shipped.decode_step_latency_s(64, 2048.0))


def test_an_overlay_shares_the_loaded_files_and_changes_only_the_hash(tmp_path):
    from tests.profiler.helpers import write_profile

    specs = load_profiles([write_profile(tmp_path / "h100.yaml", gpu="H100", bf16_tflops=700.0)]).specs
    base = Catalog.shipped()
    profiled = base.with_overlay(specs)
    assert profiled.gpu_catalog is base.gpu_catalog and profiled.prices is base.prices
    assert profiled.find_gpu("H100") == specs[0] != base.find_gpu("H100")
    assert profiled.sha256 == loader.catalog_sha256(specs) != base.sha256
    assert base.with_overlay(()) is base


def test_a_sweep_worker_builds_its_catalog_and_leaves_the_process_one_alone(small_catalog):
    import pickle

    from hetplan.sweep.case import use_catalog

    chosen = use_catalog(None, None, str(small_catalog))
    assert chosen.folder == small_catalog
    assert use_catalog(None, None, str(small_catalog)) is chosen  # the worker's cases share its loaded files
    assert use_catalog(None, None, str(Catalog.shipped().folder)) is Catalog.shipped()
    assert use_catalog(None, None, None) is Catalog.shipped()
    copy = pickle.loads(pickle.dumps(chosen.with_overlay(Catalog.shipped().gpus[:1])))  # what a worker receives
    assert (copy.folder, copy.overlay, copy.sha256) == (chosen.folder, Catalog.shipped().gpus[:1], copy.sha256)
