"""``hetplan simulate --host-kv``: the host DRAM/SSD tier's sizes from the command line, refused with a one-line
error when malformed, applied to the run and recorded in ``--json``."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.commands.simulate import parse_host_kv
from hetplan.errors import InputError
from tests.conftest import FIXTURES

PLAN = FIXTURES / "plan_two_combos.json"
TRACE = FIXTURES / "azure_conv_200.csv"


def test_sizes_parse_in_binary_and_decimal_units():
    t = parse_host_kv("dram=256GiB,ssd=2TiB")
    assert (t.dram_gib, t.ssd_gib) == (256.0, 2048.0)
    assert parse_host_kv(" SSD = 500 GB ").ssd_gib == pytest.approx(500e9 / 2**30)
    only = parse_host_kv("ssd=0")  # DRAM left out: the tier's default; SSD 0 needs no unit
    assert (only.dram_gib, only.ssd_gib) == (256.0, 0.0)
    assert math.isinf(parse_host_kv("dram=1.5GiB").ssd_gib)  # SSD left out: unbounded


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("dram=256", "has no unit"),
        ("dram=-1GiB", "is not a size"),
        ("dram=1PB", "is not a size"),
        ("dram=nanGiB", "is not a size"),
        ("dram=1e400GiB", "is not a finite size"),
        ("hbm=1GiB", "unknown key 'hbm'"),
        ("dram=1GiB,dram=2GiB", "gives dram twice"),
        ("dram", "has no '='"),
        ("dram=1GiB,", "an empty item"),
    ],
)
def test_bad_sizes_are_refused_naming_the_flag(value, message):
    with pytest.raises(InputError, match=message) as err:
        parse_host_kv(value)
    assert "--host-kv" in err.value.what


def test_the_run_uses_the_tier_and_the_json_records_it():
    runner = CliRunner()
    args = ["simulate", str(PLAN), "--trace", str(TRACE), "--max-requests", "60", "--json"]
    plain = json.loads(runner.invoke(app, args).stdout)
    assert "host_kv" not in plain
    res = runner.invoke(app, [*args, "--host-kv", "dram=64GiB,ssd=1TiB"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["host_kv"] == {"dram_gib": 64.0, "ssd_gib": 1024.0, "dram_gb_per_s": 25.0, "ssd_gb_per_s": 5.0,
                              "restore_latency_s": 0.001}  # fmt: skip
    bad = runner.invoke(app, [*args, "--host-kv", "dram=lots"])
    assert bad.exit_code == 2 and "Error: --host-kv dram='lots' is not a size" in bad.output
    assert "Traceback" not in bad.output


def test_the_flag_reaches_the_run_config():
    from hetplan.commands.simulate import SimOptions, build_request

    req = build_request(PLAN, SimOptions(trace=(str(TRACE),), host_kv="dram=64GiB"))
    assert req.config.host_kv is not None and req.config.host_kv.dram_gib == 64.0
    assert build_request(PLAN, SimOptions(trace=(str(TRACE),))).config.host_kv is None


def test_the_printed_run_names_the_tier():
    res = CliRunner().invoke(
        app, ["simulate", str(PLAN), "--trace", str(TRACE), "--max-requests", "60", "--host-kv", "dram=64GiB"],
        env={"NO_COLOR": "1", "COLUMNS": "200"},
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "host KV tier per instance: DRAM 64 GiB, SSD unbounded" in res.output
