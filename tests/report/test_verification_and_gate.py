"""Reports of verified plans (the simulated check in every format) and the gate's output: readable SLO changes, YAML
gate baselines and a reader that closes the pipe early."""

from __future__ import annotations

import copy
import html
import json
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.plan.doc import from_doc
from hetplan.plan.doc import read_plan_doc as load_plan
from hetplan.report.gate import compare, slo_change
from tests.conftest import EXAMPLES, ROOT
from tests.helpers import cli

PLAN = ROOT / "tests" / "fixtures" / "plan_example_a.json"
HETPLAN = [sys.executable, "-c", "from hetplan.cli.main import main; main()"]
runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


@pytest.fixture(scope="module")
def verified_b(tmp_path_factory):
    """Example (b) planned without headroom and without re-sizing at 11 req/s: the model says the SLOs hold (at
    about its capacity), the simulation says they do not, in sample already (p90 TTFT 1.66 s against 1.50 s). At
    8 and 9 req/s, since the all-reduce unit fix, it holds in sample and misses only out of sample; at its own
    4 req/s the plan verifies."""
    out = tmp_path_factory.mktemp("verified") / "b.yaml"
    res = invoke("plan", EXAMPLES / "cauchy-h800-a800-h20.yaml", "--headroom", "0", "--no-resize", "--no-analysis",
                 "--goodput", "11", "--strategy", "cauchy", "--out", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    return out


def _reports(path, tmp_path):
    texts = {}
    for fmt in ("md", "html", "json"):
        target = tmp_path / f"r.{fmt}"
        assert invoke("report", path, "--out", target, "--force").exit_code == 0
        texts[fmt] = target.read_text()
    res = invoke("report", path)
    assert res.exit_code == 0, res.output
    texts["term"] = res.stdout
    return texts


def test_report_shows_the_simulated_check_in_every_format(verified_b, tmp_path):
    v = load_plan(verified_b)["verification"]
    assert v["status"] == "not verified" and v["misses"]  # the premise: this plan misses in simulation
    texts = _reports(verified_b, tmp_path)
    joint = f"joint {v['attainment_by_slo']['joint'] * 100:.1f} %"
    ttft = f"{v['ttft_p_s']:.2f} s vs SLO 1.50 s: MISSED"
    for fmt in ("md", "html", "term"):
        text = html.unescape(texts[fmt]) if fmt == "html" else texts[fmt]
        assert "Simulated check" in text and "SLO MISSED in simulation" in text, fmt
        assert joint in text and ttft in text and "fcfs" in text and v["arrivals"] in text, fmt
        served = f"{v['goodput_req_per_s']:.3g} req/s met every SLO, offered {v['target_req_per_s']:g} req/s"
        assert served in " ".join(text.split()), fmt  # the served goodput, named against the offered rate
        assert " ".join(v["verdict"].split()) in " ".join(text.split()), fmt  # the verdict, in the first block
        assert "met (model), sim MISSED" in text, fmt
        for miss in v["misses"]:
            assert miss in text, fmt
    assert "| met |" not in texts["md"] and "<td>met</td>" not in texts["html"]
    assert '<td class="missed">met (model), sim MISSED</td>' in texts["html"]
    rv = json.loads(texts["json"])["plans"][0]["verification"]
    assert rv["slo_held"] is False and rv["ttft_q_s"] == v["ttft_p_s"] and rv["misses"] == v["misses"]
    assert rv["attainment"] == {k: v["attainment_by_slo"][k] for k in ("joint", "ttft", "tpot")}
    assert rv["status"] == "not verified" and rv["verdict"] == v["verdict"]
    assert _reports(verified_b, tmp_path) == texts  # byte-identical run to run


def _with_verification(tmp_path, **change):
    plan = load_plan(PLAN)
    q = plan["scenario"]["slo"]["percentile"]
    plan["verification"] = {
        "policy": "fcfs",
        "target_req_per_s": plan["scenario"]["goodput_target_req_per_s"],
        "rate_scale": 1.0,
        "arrivals": "Poisson arrivals at 5 req/s (seed 0; the workload has no timestamps)",
        "requests": 1000,
        "unfinished": 0,
        "dropped": 0,
        "attainment": {"ttft": 0.97, "tpot": 0.99, "joint": 0.96},
        "goodput_req_per_s": 4.9,
        f"ttft_p{q:g}_s": None,  # a non-finite percentile is written as null
        f"tpot_p{q:g}_s": 0.031,
        "misses": [],
        "warnings": [],
        "resized": {
            "headroom_asked": 0.1,
            "headroom_used": 0.2,
            "usd_per_hour_before": 50.0,
            "usd_per_hour_after": plan["total_usd_per_hour"],
            "attempts": [{"headroom": 0.1}, {"headroom": 0.2}],
        },
    }
    plan["verification"].update(change)
    path = tmp_path / "v.json"
    path.write_text(json.dumps(plan))
    return path


def test_resized_plan_and_null_values(tmp_path):
    path = _with_verification(tmp_path)
    after = load_plan(PLAN)["total_usd_per_hour"]
    texts = _reports(path, tmp_path)
    for fmt in ("md", "html", "term"):
        text = html.unescape(texts[fmt]) if fmt == "html" else texts[fmt]
        assert "SLOs held in simulation" in text and "met (model)" in text and "sim MISSED" not in text, fmt
        assert "- (not finite) vs SLO" in text and "31 ms vs SLO" in text, fmt
        assert "asked 0.1, used 0.2 (2 attempts)" in text, fmt
        assert f"$50.00 -> ${after:,.2f} ({(after / 50 - 1) * 100:+.1f} %)" in text, fmt
    rv = json.loads(texts["json"])["plans"][0]["verification"]
    assert rv["ttft_q_s"] is None and rv["resized"]["attempts"] == 2 and rv["slo_held"] is True
    sparse = _with_verification(tmp_path, attainment={}, goodput_req_per_s=None, resized=None)
    md = invoke("report", sparse, "--format", "md").stdout
    assert "| SLO attainment | joint -, TTFT -, TPOT - (needs 90 %) |" in md
    assert "| goodput over the serving span | - req/s met every SLO, offered 5 req/s (" in md and "resized" not in md
    assert invoke("report", sparse).exit_code == 0


def test_unverified_plans_render_as_before():
    md = invoke("report", PLAN, "--format", "md").stdout
    assert "Simulated check" not in md and "(model)" not in md and "| met |" in md
    assert "verification" not in json.loads(invoke("report", PLAN, "--format", "json").stdout)["plans"][0]


def test_slo_changes_are_readable():
    old = {"ttft_s": 1.0, "tpot_s": 0.1, "percentile": 90.0}
    assert slo_change(old, dict(old, ttft_s=2.0)) == "SLO: TTFT 1.00 s -> 2.00 s, TPOT unchanged, percentile unchanged"
    assert slo_change(old, dict(old, tpot_s=0.05, percentile=99.0)) == (
        "SLO: TTFT unchanged, TPOT 100 ms -> 50 ms, percentile p90 -> p99"
    )
    assert slo_change(old, dict(old, ttft_s=1.001)) == "SLO: TTFT 1 s -> 1.001 s, TPOT unchanged, percentile unchanged"
    plan = load_plan(PLAN)
    other = copy.deepcopy(plan)
    other["scenario"]["slo"]["ttft_s"] = plan["scenario"]["slo"]["ttft_s"] * 2
    changes = [c for c in compare(from_doc(other), plan, 0.02, None).changes if c.startswith("SLO")]
    assert len(changes) == 1 and "{" not in changes[0] and "TPOT unchanged" in changes[0]


def test_gate_writes_and_reads_a_yaml_baseline(tmp_path, examples):
    scenario = examples / "cauchy-h800-a800-h20.yaml"
    base = tmp_path / "bl2.yaml"
    assert invoke("gate", scenario, "--baseline", base, "--update-baseline").exit_code == 0
    text = base.read_text()
    assert not text.lstrip().startswith("{")  # YAML, not JSON in a .yaml file
    assert yaml.safe_load(text)["kind"] == "gate-baseline"
    res = invoke("gate", scenario, "--baseline", base, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["passed"] is True
    res = invoke("gate", scenario, "--baseline", tmp_path / "bl.txt", "--update-baseline")
    assert res.exit_code == 2 and "*.json, *.yaml or *.yml" in res.output
    assert not (tmp_path / "bl.txt").exists()


@pytest.mark.parametrize("args", [[], ["--format", "md"]])
def test_a_closed_pipe_exits_quietly(args):
    proc = subprocess.Popen(
        [*HETPLAN, "report", str(PLAN), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()  # the reader is gone before hetplan writes (hetplan report PLAN | head -0)
    err = proc.stderr.read()
    assert proc.wait() == 0 and err == b""


def test_a_closed_pipe_keeps_the_gate_verdict(tmp_path):
    plan = load_plan(PLAN)
    dearer = copy.deepcopy(plan)
    dearer["total_usd_per_hour"] *= 1.5
    current = tmp_path / "plan.json"
    current.write_text(json.dumps(dearer))
    proc = subprocess.Popen(
        [*HETPLAN, "report", str(current), "--baseline", str(PLAN), "--format", "md"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait() == 1 and "gate FAIL" in err and "Traceback" not in err


def test_the_gate_fails_when_a_verified_plan_stops_verifying():
    plan = load_plan(PLAN)
    base = copy.deepcopy(plan)
    base["verification"] = {"status": "verified", "verdict": "verified on x (10 requests): ..."}
    now = copy.deepcopy(plan)
    now["verification"] = {"status": "not verified", "verdict": "NOT verified on x (10 requests): ..."}
    failed_gate = compare(from_doc(now), base, 0.02, None)
    assert not failed_gate.passed
    assert any("this one is not: NOT verified on x" in f for f in failed_gate.failures)
    assert "verification: verified -> not verified" in failed_gate.changes
    assert compare(from_doc(base), base, 0.02, None).passed  # still verified
    assert compare(from_doc(plan), base, 0.02, None).passed  # gate run with --no-verify: nothing to compare


def test_the_gate_re_plans_with_the_plan_commands_default_strategy(monkeypatch):
    """The gate gates the plan a user gets from ``hetplan plan`` (strategy ``all``, the cheapest), not the API's
    default Cauchy plan: example (a) is a Mélange plan since the all-reduce refit, and its baseline was Cauchy's."""
    from hetplan import api
    from hetplan.commands.gate import load_scenarios, replan

    seen = []
    monkeypatch.setattr(api, "plan", lambda scenario, strategy, **kw: seen.append(strategy))
    monkeypatch.setattr(api, "plan_verified", lambda scenario, strategy, **kw: seen.append(strategy))
    scenarios = load_scenarios([EXAMPLES / "llama3-70b-azure-conv.yaml"])
    replan(scenarios, False, None, None, strict=False, progress=None)
    replan(scenarios, True, None, None, strict=False, progress=None)
    assert seen == ["all", "all"]
