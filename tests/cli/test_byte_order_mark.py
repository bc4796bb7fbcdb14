"""Files saved with a UTF-8 byte-order mark (Excel's "CSV UTF-8", Windows Notepad) read as the same file without
one, through every reader: plan files and other JSON documents, points tables, load curves, Mooncake traces. Before,
JSON was "not valid JSON at line 1, column 1", a points header named ``\\ufeffmodel``, a load curve's first cell
``\\ufeff0`` made it a trace, and a Mooncake line was "not a Mooncake record". (YAML and pandas' CSV reader already
skipped the mark; the SkyPilot ``vms.csv`` has its own test in test_prices_regions.py.)"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.conftest import ROOT
from tests.helpers import cli

FIX = ROOT / "tests" / "fixtures"
PLAN = FIX / "plan_example_a.json"
runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}
BOM = b"\xef\xbb\xbf"
TINY = (
    "schema_version: 1\nkind: scenario\nname: tiny-8b\nmodel: Llama-3-8B\n"
    "workload: {synthetic: {class: balanced, rate_per_s: 2, requests: 200}}\n"
    "slo: {ttft: 2s, tpot: 100ms, percentile: p90}\ngpus: [H100]\ncloud: aws\ntp: [1]\n"
)


def _copy(folder: Path, name: str, data: bytes, bom: bool) -> Path:
    path = folder / ("bom" if bom else "plain") / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes((BOM if bom else b"") + data)
    return path


def _tiny(folder: Path) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(TINY)
    return path


# each case: the file's name and bytes, and the command that reads it (given the file and a scratch folder)
CASES: dict[str, tuple[str, bytes, Callable[[Path, Path], tuple[object, ...]]]] = {
    "report: plan JSON": ("plan.json", PLAN.read_bytes(), lambda f, d: ("report", f, "--format", "json")),
    "estimate --points": (
        "points.csv",
        b"model,gpu,tp,concurrency,isl,osl\nLlama-3-8B,H100,1,8,1000,200\n",
        lambda f, d: ("estimate", "--points", f, "--json"),
    ),
    "calibrate-perf: points CSV": (
        "measured.csv",
        (FIX / "user_calibration" / "points_measured.csv").read_bytes(),
        lambda f, d: ("calibrate-perf", f, "--json"),
    ),
    "calibrate-perf: vllm bench JSON": (
        "run.json",
        (FIX / "user_calibration" / "vllm_bench_c16.json").read_bytes(),
        lambda f, d: ("calibrate-perf", f, "--json"),
    ),
    "autoscale: load curve": (
        "curve.csv",
        b"0,1.3,1\n600,2.5,1\n1200,0.5,1\n",
        lambda f, d: ("autoscale", _tiny(d), "--load-curve", f, "--json"),
    ),
    "simulate: Mooncake trace": (
        "trace.jsonl",
        (FIX / "mooncake_300.jsonl").read_bytes(),
        lambda f, d: ("simulate", PLAN, "--trace", f, "--max-requests", "30", "--json"),
    ),
    "simulate: Mooncake trace, sniffed": (
        "trace.txt",
        (FIX / "mooncake_300.jsonl").read_bytes(),
        lambda f, d: ("simulate", PLAN, "--trace", f, "--max-requests", "30", "--json"),
    ),
    "plan: scenario YAML": ("tiny.yaml", TINY.encode(), lambda f, d: ("plan", f, "--no-verify", "--json")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_file_with_a_byte_order_mark_reads_as_without(name: str, tmp_path: Path) -> None:
    filename, data, args = CASES[name]
    out = {}
    for bom in (False, True):
        path = _copy(tmp_path, filename, data, bom)
        res = runner.invoke(app, cli(args(path, tmp_path)), env=ENV)
        assert res.exit_code == 0, (bom, res.output[-600:])
        text = res.stdout.replace(str(path), "FILE").replace(str(path.parent), "DIR")
        out[bom] = re.sub(r"\b[0-9a-f]{16,64}\b", "SHA256", text)  # the file's own hash differs by the mark
    assert out[True] == out[False]
