"""Prices you can date and move (issue 31 item 5): catalog offers per region with their snapshot date and source,
the cheapest region or a pinned one (``--region``), ``catalog prices`` and ``catalog import-prices`` of a SkyPilot
``vms.csv`` folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from hetplan.catalog.context import Catalog
from hetplan.catalog.loader import find_gpu, load_prices
from hetplan.catalog.pricing import resolve_price
from hetplan.catalog.skypilot import import_folder
from hetplan.cli.main import app
from tests.conftest import ROOT
from tests.helpers import cli, owned_only_scenario

runner = CliRunner()
SKY = ROOT / "tests" / "fixtures" / "skypilot"
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def invoke(*args: object):  # type: ignore[no-untyped-def]
    return runner.invoke(app, cli(args), env=ENV)


def _purchase(res) -> list[tuple[str, str, str, float]]:  # type: ignore[no-untyped-def]
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    return [(p["provider"], p["instance_type"], p["region"], p["usd_per_hour_each"]) for p in doc["purchase"]]


@pytest.mark.parametrize("cloud", ["aws", "gcp", "azure"])
def test_each_major_cloud_lists_two_regions_with_date_and_source(cloud: str) -> None:
    cat = load_prices()
    rows = [p for p in cat.prices if p.cloud == cloud]
    assert len({p.region for p in rows}) >= 2
    assert all(p.source.startswith("skypilot-catalog catalogs/") and "@" in p.source for p in rows)
    assert cat.as_of


def test_the_same_offer_in_two_regions_prices_the_cheaper_spot_region() -> None:
    h100 = find_gpu("H100")
    best = resolve_price(h100, Catalog.shipped(), "aws", spot=True)
    assert best is not None and best.usd_per_gpu_hour == pytest.approx(14.3773 / 8) and "us-east-2" in best.source
    pinned = resolve_price(
        h100, Catalog.shipped(), "aws", spot=True, region="US-WEST-2"
    )  # regions compare without case
    assert pinned is not None and pinned.usd_per_gpu_hour == pytest.approx(30.5798 / 8) and "us-west-2" in pinned.source


@pytest.mark.slow
def test_a_plan_buys_in_the_cheapest_region_or_the_pinned_one(tmp_path: Path) -> None:
    scenario = owned_only_scenario(tmp_path, rented=True)  # Llama-3.1-8B on AWS H100
    spot = _purchase(invoke("plan", scenario, "--no-verify", "--json", "--spot"))
    assert spot and all(r[2] == "us-east-2" and r[3] == pytest.approx(14.3773) for r in spot)
    pinned = _purchase(invoke("plan", scenario, "--no-verify", "--json", "--spot", "--region", "us-west-2"))
    assert pinned and all(r[2] == "us-west-2" and r[3] == pytest.approx(30.5798) for r in pinned)
    text = scenario.read_text() + "region: us-west-2\n"  # the scenario field does the same
    (tmp_path / "pinned.yaml").write_text(text)
    assert _purchase(invoke("plan", tmp_path / "pinned.yaml", "--no-verify", "--json", "--spot")) == pinned


def test_an_unknown_region_is_a_one_line_error(tmp_path: Path) -> None:
    res = invoke("plan", owned_only_scenario(tmp_path, rented=True), "--no-verify", "--region", "mars-1")
    assert res.exit_code in (1, 2) and "Traceback" not in res.output
    assert "unknown region 'mars-1' for aws" in res.output and "us-west-2" in res.output


def test_catalog_prices_shows_regions_dates_and_sources() -> None:
    res = invoke("catalog", "prices", "--gpu", "H100", "--cloud", "aws")
    assert res.exit_code == 0, res.output
    for text in ("us-east-1", "us-east-2", "us-west-2", "aws: 2026-11-01, skypilot-catalog catalogs/v7/aws/vms.csv"):
        assert text in res.stdout
    rows = json.loads(invoke("catalog", "prices", "--region", "westus3", "--json").stdout)
    assert rows and {r["region"] for r in rows} == {"westus3"} and all(r["as_of"] for r in rows)
    bad = invoke("catalog", "prices", "--region", "nowhere")
    assert bad.exit_code in (1, 2) and "unknown region" in bad.output


def test_import_prices_merges_zones_maps_names_and_reports_skips(tmp_path: Path) -> None:
    res = import_folder(SKY, Catalog.shipped(), as_of="2026-12-01")
    offers = {(o["instance_type"], o["region"]): o for o in res.doc["offers"]}
    l40s = offers[("g6e.12xlarge", "us-east-1")]
    assert l40s["gpu"] == "L40S" and l40s["gpus_per_instance"] == 4
    assert l40s["usd_per_instance_hour"] == 10.49264 and l40s["spot_usd_per_instance_hour"] == 2.9  # lowest zone
    assert "spot_usd_per_instance_hour" not in offers[("g6e.12xlarge", "eu-west-1")]
    assert offers[("p4d.24xlarge", "us-east-1")]["gpu"] == "A100-40GB-SXM"  # SkyPilot's A100 is the 40 GB part
    assert ("p5e.48xlarge", "us-east-2") not in offers and res.skipped == {"no on-demand price": 1}
    assert res.unknown == {"Inferentia2": 1}
    mapped = import_folder(
        SKY, Catalog.shipped(), mapping={"A100": "A100-80GB-SXM"}, regions=["US-EAST-1"], as_of="2026-12-01"
    )
    assert {o["region"] for o in mapped.doc["offers"]} == {"us-east-1"}
    assert {o["gpu"] for o in mapped.doc["offers"]} == {"A100-80GB-SXM", "L40S"}


def test_import_prices_cli_writes_a_price_file_a_plan_buys_from(tmp_path: Path) -> None:
    out = tmp_path / "prices.yaml"
    res = invoke("catalog", "import-prices", SKY / "aws", "--out", out, "--as-of", "2026-12-01")
    assert res.exit_code == 0, res.output
    assert "instance sizes the shipped catalog lacks: aws g6e.12xlarge (4x L40S)" in res.output
    assert "Inferentia2" in res.output
    again = invoke("catalog", "import-prices", SKY / "aws", "--as-of", "2026-12-01")
    assert again.stdout == out.read_text()  # the same files give the same price file
    assert invoke("catalog", "import-prices", SKY, "--out", out).exit_code != 0  # exists: not overwritten
    shown = invoke("catalog", "prices", "--prices", out)
    assert "2026-12-01" in shown.stdout and "g6e.12xlarge" in shown.stdout and "eu-west-1" in shown.stdout
    scenario = tmp_path / "l40s.yaml"
    text = owned_only_scenario(tmp_path, rented=True).read_text().replace("gpus: [H100]", "gpus: [L40S]")
    scenario.write_text(text.replace("cloud: aws\n", ""))
    cheapest = _purchase(invoke("plan", scenario, "--prices", out, "--no-verify", "--json"))
    assert cheapest and {r[1:3] for r in cheapest} == {("g6e.12xlarge", "us-east-1")}
    pinned = _purchase(invoke("plan", scenario, "--prices", out, "--no-verify", "--json", "--region", "eu-west-1"))
    assert pinned and all(r[2] == "eu-west-1" and r[3] == 11.5 for r in pinned)
    spot = _purchase(invoke("plan", scenario, "--prices", out, "--no-verify", "--json", "--spot"))
    assert spot and all(r[3] == 2.9 for r in spot)  # the file's spot price, used with --spot


def test_import_prices_bad_folders_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "vms.csv").write_text("InstanceType,Price\np5.48xlarge,98.32\n")
    for folder, word in ((tmp_path / "missing", "not a folder"), (tmp_path, "no vms.csv"),
                         (tmp_path / "x", "column AcceleratorName is missing")):  # fmt: skip
        if folder == tmp_path:
            folder = tmp_path / "empty"
            folder.mkdir()
        res = invoke("catalog", "import-prices", folder)
        assert res.exit_code in (1, 2) and "Traceback" not in res.output and word in res.output, res.output
    bad_map = invoke("catalog", "import-prices", SKY, "--map", "A100")
    assert bad_map.exit_code in (1, 2) and "NAME=GPU" in bad_map.output


def test_import_prices_reads_a_vms_csv_with_a_byte_order_mark(tmp_path: Path) -> None:
    """A vms.csv saved by Excel ("CSV UTF-8") starts with a BOM: its first column was read as '\ufeffInstanceType'
    and the import refused it as 'column InstanceType is missing'."""
    (tmp_path / "aws").mkdir()
    (tmp_path / "aws" / "vms.csv").write_bytes(b"\xef\xbb\xbf" + (SKY / "aws" / "vms.csv").read_bytes())
    assert (
        import_folder(tmp_path, Catalog.shipped(), as_of="2026-12-01").doc
        == import_folder(SKY, Catalog.shipped(), as_of="2026-12-01").doc
    )


@pytest.mark.parametrize(
    "content,word", [(b"", "is empty"), (b"  \n", "is empty"), (b"InstanceType,\xff\xfe\n", "is not UTF-8 text")]
)
def test_an_empty_or_binary_vms_csv_says_so(tmp_path: Path, content: bytes, word: str) -> None:
    """Both were reported as 'column InstanceType is missing' (bytes that are not UTF-8 were replaced silently)."""
    (tmp_path / "vms.csv").write_bytes(content)
    res = invoke("catalog", "import-prices", tmp_path, "--cloud", "aws", "--out", tmp_path / "p.yaml")
    assert res.exit_code == 2 and word in res.output and "Traceback" not in res.output, res.output
    assert not (tmp_path / "p.yaml").exists()


def test_imported_file_is_a_valid_price_file(tmp_path: Path) -> None:
    from hetplan.catalog.schemas import UserPriceFile

    doc = import_folder(SKY, Catalog.shipped(), as_of="2026-12-01").doc
    UserPriceFile.model_validate(yaml.safe_load(yaml.safe_dump(doc)))


def test_import_prices_never_writes_a_price_beyond_what_the_loader_reads(tmp_path: Path) -> None:
    """Found by the fuzz tests (tests/fuzz/test_every_command.py): a vms.csv price of 1e300 was written into the
    price file, which ``--prices`` then refused (beyond hetplan.input_checks.MAX_NUMBER); such a price now counts as
    missing (the row is skipped as having no on-demand price, a spot price is left out)."""
    text = (SKY / "aws" / "vms.csv").read_text()
    (tmp_path / "aws").mkdir()
    (tmp_path / "aws" / "vms.csv").write_text(text.replace("32.7726", "1e300").replace(",2.9,", ",1e16,"))
    out = tmp_path / "p.yaml"
    res = invoke("catalog", "import-prices", tmp_path, "--out", out, "--as-of", "2026-12-01")
    assert res.exit_code == 0, res.output
    offers = yaml.safe_load(out.read_text())["offers"]
    assert "p4d.24xlarge" not in {o["instance_type"] for o in offers}
    assert max(o.get("spot_usd_per_instance_hour", 0) for o in offers) < 1e15
    assert invoke("catalog", "prices", "--prices", out).exit_code == 0


@pytest.mark.parametrize("as_of", ["1e+300", "x", "2026-13-45", ""])
def test_import_prices_as_of_must_be_a_date(tmp_path: Path, as_of: str) -> None:
    """Found by the fuzz tests: ``--as-of 1e+300`` was written as the file's date, which ``--prices`` then refused
    (number-like text is held to the numeric rule); any --as-of that is not a YYYY-MM-DD date is now an Error."""
    out = tmp_path / "p.yaml"
    res = invoke("catalog", "import-prices", SKY, "--out", out, "--as-of", as_of)
    assert res.exit_code == 2 and "--as-of" in res.output and "YYYY-MM-DD" in res.output, res.output
    assert "Traceback" not in res.output and not out.exists()


def test_import_prices_refuses_text_the_price_file_loader_would_refuse(tmp_path: Path) -> None:
    """Found by the fuzz tests: a vms.csv region of ``1e+300`` was written into the price file, which ``--prices``
    then refused (text a schema would read as a number is held to the numeric rule); now a one-line Error naming
    the offer's field, and nothing written."""
    text = (SKY / "aws" / "vms.csv").read_text()
    (tmp_path / "aws").mkdir()
    (tmp_path / "aws" / "vms.csv").write_text(text.replace(",eu-west-1,", ",1e+300,"))
    out = tmp_path / "p.yaml"
    res = invoke("catalog", "import-prices", tmp_path, "--out", out, "--as-of", "2026-12-01")
    assert res.exit_code == 2 and "region" in res.output and "Traceback" not in res.output, res.output
    assert not out.exists()
