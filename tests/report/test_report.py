"""Reports and the cost gate. The report tests read stored plans, so they test rendering only.

The golden reports (``tests/golden/report_golden.json`` and ``.md``) render ``tests/fixtures/plan_report_golden.json``,
a frozen, hand-made plan that no script re-plans: a refit or a planner change leaves them as they are, and they move
only when rendering does. After an intended rendering change, refresh them on purpose and review the diff:

    python scripts/refresh.py --only golden

The other tests read ``tests/fixtures/plan_example_a.json`` (re-planned by ``python scripts/refresh.py --only
fixtures``; ``tests/unit/test_plan.py`` says when it is stale).
"""

import copy
import importlib.util
import json
import shutil
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.errors import InputError
from hetplan.plan.doc import from_doc
from hetplan.plan.doc import read_plan_doc as load_plan
from hetplan.report.gate import compare, github_annotations, markdown_summary, parse_fraction
from tests.conftest import ROOT
from tests.helpers import cli, owned_only_scenario

PLAN = ROOT / "tests" / "fixtures" / "plan_example_a.json"
GOLDEN_PLAN = ROOT / "tests" / "fixtures" / "plan_report_golden.json"
GOLDEN = ROOT / "tests" / "golden" / "report_golden"
runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


@pytest.mark.parametrize("fmt", ["json", "md"])
def test_report_matches_golden(fmt):
    """The frozen plan renders byte for byte as stored (refresh on purpose: ``scripts/refresh.py --only golden``)."""
    res = invoke("report", GOLDEN_PLAN, "--format", fmt)
    assert res.exit_code == 0, res.output
    assert res.stdout == GOLDEN.with_suffix(f".{fmt}").read_text(), (
        f"the {fmt} report of {GOLDEN_PLAN.name} changed: if the rendering change is intended, run "
        "python scripts/refresh.py --only golden and review the diff"
    )


def test_the_golden_plan_is_frozen_and_covers_what_the_report_renders():
    """The golden's plan is hand-made and frozen (no refresh step writes it), and it carries the blocks the report
    renders: a simulated check with out-of-sample runs, the analysis, the baselines and a purchase."""
    spec = importlib.util.spec_from_file_location("refresh", ROOT / "scripts" / "refresh.py")
    assert spec is not None and spec.loader is not None
    refresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refresh)
    assert refresh.GOLDEN_PLAN == GOLDEN_PLAN.relative_to(ROOT).as_posix()
    assert GOLDEN_PLAN.name not in {name for name, *_ in refresh.FIXTURES}
    doc = load_plan(GOLDEN_PLAN)
    assert doc["verification"]["out_of_sample"]["runs"] and doc["verification"]["model_error"]
    assert doc["analysis"]["price_sensitivity"] and doc["analysis"]["cost_vs_goodput"]
    assert set(doc["baselines"]) >= {"homogeneous", "melange"} and doc["purchase"]
    md = GOLDEN.with_suffix(".md").read_text()
    assert "Simulated check" in md and "Strategies compared" in md


@pytest.mark.parametrize("fmt", ["json", "md", "html"])
def test_reports_are_byte_identical(tmp_path, fmt):
    a, b = tmp_path / f"a.{fmt}", tmp_path / f"b.{fmt}"
    assert invoke("report", PLAN, "--format", fmt, "--out", a).exit_code == 0
    assert invoke("report", PLAN, "--format", fmt, "--out", b).exit_code == 0
    assert a.read_bytes() == b.read_bytes()


def test_report_contents():
    doc = json.loads(invoke("report", PLAN, "--format", "json").stdout)
    p = doc["plans"][0]
    plan = load_plan(PLAN)
    assert p["usd_per_hour"] == plan["total_usd_per_hour"]
    assert p["usd_per_month"] == pytest.approx(plan["total_usd_per_hour"] * 730, rel=1e-5)
    tokens = plan["scenario"]["workload"]["prompt_tokens_mean"] + plan["scenario"]["workload"]["output_tokens_mean"]
    assert p["usd_per_million_tokens"] == pytest.approx(
        plan["total_usd_per_hour"] / (3600 * plan["goodput_req_per_s"] * tokens) * 1e6,
        rel=0.02,  # the planner's means come from a deterministic sample of <= 4,000 requests
    )
    assert set(p["strategies"]) == {"cauchy", "homogeneous", "melange", "mixed"}
    assert p["gains"]["homogeneous"]["cost_saved_fraction"] == pytest.approx(plan["gain_over_homogeneous"], abs=1e-4)
    assert all(d["meets_ttft_slo"] and d["meets_tpot_slo"] for d in p["deployment"])
    assert len(p["price_sensitivity"]) == 2 * len(plan["scenario"]["prices"])


def test_markdown_and_html_carry_the_numbers():
    md = invoke("report", PLAN, "--format", "md").stdout
    cost = load_plan(PLAN)["total_usd_per_hour"]
    assert f"${cost:,.2f}" in md and "Strategies compared" in md and "| melange |" in md
    html = invoke("report", PLAN, "--format", "html").stdout
    assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 4  # cost, GPU mix, cost vs goodput, latency
    for external in ("<script", "<link", 'src="http', 'href="http', "url(http"):
        assert external not in html  # self-contained: nothing to fetch


def _costlier(plan, factor):
    doc = copy.deepcopy(plan)
    doc["total_usd_per_hour"] = plan["total_usd_per_hour"] * factor
    doc["tokens_per_usd"] = plan["tokens_per_usd"] / factor
    return doc


@pytest.mark.parametrize("factor,code", [(0.9, 0), (1.0, 0), (1.019, 0), (1.05, 1)])
def test_gate_exit_codes(tmp_path, factor, code):
    plan = load_plan(PLAN)
    current = tmp_path / "plan.json"
    current.write_text(json.dumps(_costlier(plan, factor)))
    res = invoke("report", current, "--baseline", PLAN, "--max-cost-increase", "2%", "--format", "json")
    assert res.exit_code == code, res.output
    gate = json.loads(res.stdout)["gate"]
    assert gate["passed"] is (code == 0)
    assert gate["results"][0]["cost_change_fraction"] == pytest.approx(factor - 1, abs=1e-6)


def test_gate_tokens_ratio_and_explanation(tmp_path):
    plan = load_plan(ROOT / "tests" / "fixtures" / "plan_two_combos.json")  # two combos, one on H100s
    other = copy.deepcopy(plan)
    other["scenario"]["prices"]["H100-SXM"]["usd_per_gpu_hour"] = 14.0
    other["gpus_used"] = dict(plan["gpus_used"], **{"H100-SXM": 4})
    other["combos"][1]["count"] = 2
    other["tokens_per_usd"] = plan["tokens_per_usd"] * 0.9
    result = compare(from_doc(other), plan, 0.02, 0.95)
    assert not result.passed and "tokens/USD fell" in result.failures[0]
    assert "price of H100-SXM: $12.29 -> $14 per GPU-hour" in result.changes
    assert "GPUs of H100-SXM: 2 -> 4" in result.changes
    assert any(c.startswith("count changed: 1x H100-SXM TP2") for c in result.changes)
    assert "::error title=hetplan cost gate::" in github_annotations([result])
    assert "FAILED" in markdown_summary([result], 0.02)


def test_gate_summary_file_and_annotations(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    res = invoke("report", PLAN, "--baseline", PLAN, "--github", "--summary", summary)
    assert res.exit_code == 0
    assert "::notice title=hetplan cost gate::" in res.stdout
    assert summary.read_text().startswith("earlier step\n## hetplan cost gate: passed")


@pytest.mark.parametrize("text,value", [("2%", 0.02), ("0.5 %", 0.005), ("0%", 0.0), ("100%", 1.0)])
def test_parse_fraction(text, value):
    assert parse_fraction(text, "--max-cost-increase") == pytest.approx(value)


@pytest.mark.parametrize("text", ["2", "0.02", "abc", "-1%", "5000%", "2%%", "inf%", "nan%"])
def test_parse_fraction_refuses(text):
    with pytest.raises(InputError):
        parse_fraction(text, "--max-cost-increase")


def test_report_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "plan"}')
    res = invoke("report", bad)
    assert res.exit_code == 2 and "not a usable hetplan plan" in res.output
    res = invoke("report", PLAN, "--format", "pdf")
    assert res.exit_code == 2 and "--format" in res.output
    out = tmp_path / "r.md"
    out.write_text("keep")
    res = invoke("report", PLAN, "--out", out)
    assert res.exit_code == 2 and out.read_text() == "keep"


@pytest.mark.slow
def test_gate_command_replans_scenarios(tmp_path, examples):
    base = tmp_path / "baseline.json"
    scen = examples / "llama3-70b-azure-conv.yaml"
    assert invoke("gate", scen, "--baseline", base, "--update-baseline").exit_code == 0
    res = invoke("gate", scen, "--baseline", base, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["results"][0]["cost_change_fraction"] == 0.0
    dearer = tmp_path / "dearer.yaml"
    dearer.write_text(
        scen.read_text()
        .replace("goodput_req_per_s: 5", "goodput_req_per_s: 12")  # 8 req/s still fits the 2 instances bought at 5
        .replace("path: data/", f"path: {examples}/data/")
    )
    res = invoke("gate", dearer, "--baseline", base, "--json")
    assert res.exit_code == 1
    result = json.loads(res.stdout)["results"][0]
    assert result["cost_change_fraction"] > 0.02 and "goodput target (req/s): 5.0 -> 12.0" in result["changes"]


@pytest.mark.slow
@pytest.mark.chromium
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_html_report_renders_in_headless_chromium(tmp_path):
    html = tmp_path / "report.html"
    assert invoke("report", PLAN, "--out", html).exit_code == 0
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_html_report.py"), str(html)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    broken = tmp_path / "broken.html"
    broken.write_text(html.read_text().replace("<svg", "<xsvg").replace("</svg>", "</xsvg>"))
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_html_report.py"), str(broken)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1


def _check_html(path):
    return subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "check_html_report.py"), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
@pytest.mark.chromium
@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_html_check_is_per_chart(tmp_path, examples):
    """A tall page with one drawn chart passes (the whole-page colour share is small); a blank chart fails."""
    schedule = tmp_path / "schedule.json"
    res = invoke("autoscale", examples / "llama3-70b-azure-conv.yaml", "--diurnal", "2,8,2", "--out", schedule)
    assert res.exit_code == 0, res.output
    html = tmp_path / "schedule.html"
    assert invoke("report", schedule, "--out", html).exit_code == 0
    run = _check_html(html)
    assert run.returncode == 0, run.stdout + run.stderr
    plan_html = tmp_path / "report.html"
    assert invoke("report", PLAN, "--out", plan_html).exit_code == 0
    text = plan_html.read_text()
    blank = tmp_path / "blank.html"
    # the last chart keeps its place in the page and the DOM but draws nothing
    cut = text.rindex("<svg")
    blank.write_text(text[:cut] + '<svg style="visibility:hidden"' + text[cut + 4 :])
    run = _check_html(blank)
    assert run.returncode == 1 and "chart 4 is nearly colourless" in run.stdout, run.stdout


@pytest.mark.slow
def test_committed_example_baseline_still_holds(examples):
    """The examples' stored gate baseline (examples/ci/baseline.json) must still pass: a change to hetplan's
    model or catalogs that makes an example dearer by more than 2 % fails here until the baseline is refreshed
    on purpose (hetplan gate examples/*.yaml --baseline examples/ci/baseline.json --update-baseline, or
    python scripts/refresh.py --only baseline). The gate verifies as the baseline was made (in and out of sample,
    re-sized): an unverified plan is sized differently and is no comparison."""
    res = invoke(
        "gate",
        "--verify",
        examples / "llama3-70b-azure-conv.yaml",
        examples / "cauchy-h800-a800-h20.yaml",
        examples / "llama31-8b-mooncake.yaml",
        "--baseline",
        examples / "ci" / "baseline.json",
        "--json",
    )
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["results"]) == 3


def _scenario(tmp_path, examples, name, goodput=5, extra=""):
    text = (examples / "llama3-70b-azure-conv.yaml").read_text()
    text = (
        text.replace("name: llama3-70b-azure-conv", f"name: {name}")
        .replace("goodput_req_per_s: 5", f"goodput_req_per_s: {goodput}")
        .replace("path: data/", f"path: {examples}/data/")
    )
    path = tmp_path / f"{name}.yaml".replace("/", "_")
    path.write_text(text + extra)
    return path


@pytest.mark.slow
def test_gate_fails_on_unknown_or_unplannable_scenarios_and_warns_on_skipped(tmp_path, examples):
    base = tmp_path / "base.json"
    a, b = _scenario(tmp_path, examples, "a"), _scenario(tmp_path, examples, "b")
    assert invoke("gate", a, b, "--baseline", base, "--update-baseline").exit_code == 0
    new = _scenario(tmp_path, examples, "new")
    res = invoke("gate", new, "--baseline", base, "--json")
    assert res.exit_code == 1
    doc = json.loads(res.stdout)
    assert doc["passed"] is False and "not in the baseline" in doc["results"][0]["failures"][0]
    assert len(doc["warnings"]) == 2  # a and b were not re-planned
    broken = _scenario(
        tmp_path, examples, "a", extra="inventory: {H100: 0, A100-80GB: 0, L40S: 0, L4: 0, A10G: 0}\nrent: false\n"
    )
    res = invoke("gate", broken, b, "--baseline", base, "--github")
    assert res.exit_code == 1
    assert "::error title=hetplan cost gate::a: cannot be planned now" in res.stdout
    assert "::notice title=hetplan cost gate::b:" in res.stdout  # the other scenario was still compared


def test_update_baseline_merges_and_refuses_other_files(tmp_path, examples):
    base = tmp_path / "base.json"
    a, b = _scenario(tmp_path, examples, "a"), _scenario(tmp_path, examples, "b")
    assert invoke("gate", a, b, "--baseline", base, "--update-baseline").exit_code == 0
    assert invoke("gate", a, "--baseline", base, "--update-baseline").exit_code == 0
    assert set(json.loads(base.read_text())["scenarios"]) == {"a", "b"}
    res = invoke("gate", a, "--baseline", PLAN, "--update-baseline")
    assert res.exit_code == 2 and "not a gate baseline" in res.output


def test_report_gate_refuses_mismatches_and_mixed_stdout(tmp_path, examples):
    other = tmp_path / "other.json"
    assert invoke("plan", examples / "cauchy-h800-a800-h20.yaml", "--no-analysis", "--out", other).exit_code == 0
    res = invoke("report", other, "--baseline", PLAN)
    assert res.exit_code == 2 and "the gate compares a scenario with its own earlier plan" in res.output
    res = invoke("report", PLAN, "--baseline", PLAN, "--format", "json", "--github")
    assert res.exit_code == 2 and "--out" in res.output
    res = invoke("report", PLAN, "--max-cost-increase", "5%")
    assert res.exit_code == 2 and "need --baseline" in res.output
    res = invoke("report", PLAN, "--baseline", PLAN, "--summary", tmp_path / "missing" / "s.md")
    assert res.exit_code == 2


def test_markup_in_names_is_printed_not_interpreted(tmp_path, examples):
    scen = _scenario(tmp_path, examples, "prod [/] v2")
    out = tmp_path / "p.json"
    res = invoke("plan", scen, "--no-analysis", "--out", out)
    assert res.exit_code == 0, res.output
    assert "prod [/] v2" in res.stdout
    res = invoke("report", out)
    assert res.exit_code == 0 and "prod [/] v2" in res.stdout


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.pop("usd_per_month"),
        lambda d: d["combos"][0].pop("predicted_ttft_s"),
        lambda d: d["scenario"]["prices"]["H100-SXM"].pop("source"),
        lambda d: d.__setitem__("total_usd_per_hour", "42.2"),
        lambda d: d.__setitem__("total_usd_per_hour", -1.0),
        lambda d: d.__setitem__("gpus_used", {"H20": -2}),
        lambda d: d.__setitem__("warnings", "one"),
        lambda d: d.__setitem__("status", "infeasible"),
        lambda d: d["baselines"]["melange"].pop("total_usd_per_hour"),
    ],
)
def test_edited_plans_are_refused_with_the_field(tmp_path, edit):
    doc = json.loads(PLAN.read_text())
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    res = invoke("report", bad)
    assert res.exit_code == 2, res.output
    assert "not a usable hetplan plan" in res.output and "Traceback" not in res.output


@pytest.fixture(scope="module")
def owned_and_rented(tmp_path_factory):
    """Plans of one scenario: all on owned GPUs at $0.00/h, and renting on AWS (the same name, so they gate)."""
    folder = tmp_path_factory.mktemp("owned")
    plans = []
    for rented in (False, True):
        out = folder / f"{'rented' if rented else 'owned'}.json"
        res = invoke("plan", owned_only_scenario(folder, rented), "--out", out)
        assert res.exit_code == 0, res.output
        plans.append(out)
    owned = load_plan(plans[0])
    assert owned["total_usd_per_hour"] == 0.0 and all(p["owned"] for p in owned["purchase"])
    return plans[0], plans[1]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["term", "md", "html", "json"])
def test_owned_only_plan_reports_in_every_format(owned_and_rented, fmt):
    owned, _ = owned_and_rented
    res = invoke("report", owned, "--format", fmt)
    assert res.exit_code == 0, res.output
    if fmt == "json":
        p = json.loads(res.stdout)["plans"][0]
        assert p["usd_per_hour"] == 0.0 and p["tokens_per_usd"] is None and p["output_tokens_per_usd"] is None
        assert p["gains"] and all(g == {"cost_saved_fraction": None, "tokens_per_usd_ratio": None}
                                  for g in p["gains"].values())  # fmt: skip
        assert "the same as the best single-GPU-type fleet" in p["decision"]["sentence"]
    elif fmt != "html":
        assert "$0.00" in res.stdout and "owned, priced at $0/GPU-hour" in res.stdout
        assert "-0.0 %" not in res.stdout and "dearer" not in res.stdout


def test_report_of_a_paid_plan_against_owned_only_alternatives(owned_and_rented):
    """A plan that costs money beside strategies at $0.00/h: the dearer-than sentences give dollars, not a
    percentage of nothing."""
    owned, _ = owned_and_rented
    doc = _costlier(load_plan(owned), 1.0)
    doc["total_usd_per_hour"], doc["usd_per_month"], doc["tokens_per_usd"] = 5.0, 3650.0, 1000.0
    path = owned.parent / "paid.json"
    path.write_text(json.dumps(doc))
    res = invoke("report", path, "--format", "md")
    assert res.exit_code == 0, res.output
    assert "the best single-GPU-type fleet (" in res.stdout and "$0.00/h) costs $5.00/h less" in res.stdout
    assert "$5.00/h less than this cauchy plan (tokens/USD - against 1,000)" in res.stdout


def test_gate_fails_any_rise_from_a_zero_baseline(owned_and_rented):
    owned, rented = owned_and_rented
    cost = load_plan(rented)["total_usd_per_hour"]
    res = invoke("report", rented, "--baseline", owned, "--format", "json")
    assert res.exit_code == 1, res.output
    result = json.loads(res.stdout)["gate"]["results"][0]
    assert not result["passed"] and result["cost_change_fraction"] is None and result["tokens_per_usd_ratio"] is None
    assert result["cost_change_usd_per_hour"] == pytest.approx(cost)
    assert "--max-cost-increase-usd-per-hour" in result["failures"][0] and "+0.00 %" not in res.output
    allow = f"{cost + 0.01:.2f}"
    res = invoke("report", rented, "--baseline", owned, "--max-cost-increase-usd-per-hour", allow, "--github")
    assert res.exit_code == 0, res.output
    assert f"+${cost:,.2f}/h from $0.00/h" in res.stdout
    res = invoke("report", rented, "--baseline", owned, "--max-cost-increase-usd-per-hour", f"{cost / 2:.2f}")
    assert res.exit_code == 1 and "is less" in res.output
    # unchanged at $0, and a fall to $0, pass; the tokens/USD ratio is not compared where a side costs $0
    assert invoke("report", owned, "--baseline", owned, "--min-tokens-per-usd-ratio", "0.99").exit_code == 0
    assert invoke("report", owned, "--baseline", rented, "--min-tokens-per-usd-ratio", "0.99").exit_code == 0


def test_absolute_allowance_relaxes_a_paid_baseline_too(tmp_path):
    plan = load_plan(PLAN)
    current = tmp_path / "plan.json"
    current.write_text(json.dumps(_costlier(plan, 1.05)))
    rise = plan["total_usd_per_hour"] * 0.05
    res = invoke("report", current, "--baseline", PLAN, "--max-cost-increase-usd-per-hour", f"{rise + 0.01:.2f}")
    assert res.exit_code == 0, res.output
    assert "whichever is" in res.output
    for bad in ("-1", "inf", "nan", "1e9"):
        res = invoke("report", current, "--baseline", PLAN, "--max-cost-increase-usd-per-hour", bad)
        assert res.exit_code == 2 and "--max-cost-increase-usd-per-hour" in res.output, res.output
    res = invoke("report", current, "--max-cost-increase-usd-per-hour", "1")
    assert res.exit_code == 2 and "need --baseline" in res.output


def test_gate_command_fails_a_rise_from_a_zero_baseline(owned_and_rented, tmp_path):
    owned, _ = owned_and_rented
    base = tmp_path / "baseline.json"
    base.write_text(json.dumps({"schema_version": 1, "kind": "gate-baseline", "scenarios": {
        "owned-only": load_plan(owned)}}))  # fmt: skip
    res = invoke("gate", owned_only_scenario(tmp_path, rented=True), "--baseline", base, "--json")
    assert res.exit_code == 1, res.output
    result = json.loads(res.stdout)["results"][0]
    assert not result["passed"] and "the baseline costs nothing" in result["failures"][0]


@pytest.mark.parametrize("version", [3, 0, "2", 2.5, True, None])
def test_unknown_schema_versions_are_refused(tmp_path, version):
    plan = load_plan(PLAN)
    plan["schema_version"] = version
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps(plan))
    for args in (("report", odd), ("report", PLAN, "--baseline", odd), ("emit", odd, "--out", tmp_path / "e")):
        res = invoke(*args)
        assert res.exit_code == 2 and "schema_version" in res.output and "knows: 1, 2" in res.output, res.output
        assert "Traceback" not in res.output
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"schema_version": version, "kind": "gate-baseline", "scenarios": {}}))
    res = invoke("gate", ROOT / "examples" / "llama3-70b-azure-conv.yaml", "--baseline", base)
    assert res.exit_code == 2 and "schema_version" in res.output and "knows: 1)" in res.output, res.output
    assert not (tmp_path / "e").exists()


@pytest.fixture(scope="module")
def rented_schedule(tmp_path_factory):
    """An autoscaling schedule of the rented scenario (a diurnal day of 10-minute windows)."""
    folder = tmp_path_factory.mktemp("schedules")
    path = folder / "rented.json"
    res = invoke("autoscale", owned_only_scenario(folder, rented=True), "--diurnal", "1,3,1", "--out", path)
    assert res.exit_code == 0, res.output
    return path


def test_owned_only_schedule_prints_and_reports(tmp_path):
    """Static fleets at $0 (owned GPUs without a price): autoscale's summary divided by the $0 peak fleet's cost
    and the report negated a null saving."""
    owned = tmp_path / "owned.json"
    res = invoke("autoscale", owned_only_scenario(tmp_path), "--diurnal", "1,3,1", "--out", owned)
    assert res.exit_code == 0, res.output
    assert json.loads(owned.read_text())["summary"]["static_peak_usd"] == 0.0
    res = invoke("autoscale", owned_only_scenario(tmp_path), "--diurnal", "1,3,1")
    assert res.exit_code == 0, res.output
    for fmt in ("term", "md", "html", "json"):
        res = invoke("report", owned, "--format", fmt)
        assert res.exit_code == 0, (fmt, res.output)


def _edit(doc, path, value):
    *parents, last = path
    for key in parents:
        doc = doc[key]
    if value is _DROP:
        del doc[last]
    else:
        doc[last] = value


_DROP = object()


@pytest.mark.parametrize(
    "path,value",
    [
        (("summary", "window_s"), _DROP),
        (("summary", "window_s"), 0),
        (("summary", "hours"), 0.0),
        (("summary", "gpu_hours"), []),
        (("summary", "static_peak_usd"), "x"),
        (("summary", "saving_vs_static_peak"), _DROP),
        (("windows", 0, "demand_req_per_s"), _DROP),
        (("windows", 0, "usd_per_hour"), None),
        (("windows", 0), 3),
        (("curve",), "x"),
        (("curve", "source"), _DROP),
        (("scenario",), ["x"]),
    ],
)
@pytest.mark.parametrize("fmt", ["term", "md", "html"])
def test_malformed_schedules_are_refused(rented_schedule, tmp_path, path, value, fmt):
    """Schedules missing what the report reads, or with zero-length windows, gave KeyError, TypeError or
    ZeroDivisionError tracebacks in the tables and charts."""
    doc = json.loads(rented_schedule.read_text())
    _edit(doc, path, value)
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps(doc))
    res = invoke("report", bad, "--format", fmt)
    assert res.exit_code == 2, res.output
    assert "is not a usable schedule" in res.output and str(path[-1]) in res.output


@pytest.mark.parametrize("key,value", [("goodput_req_per_s", _DROP), ("goodput_req_per_s", -1.0),
                                       ("cauchy_usd_per_hour", -5.0), ("cauchy_usd_per_hour", "x")])  # fmt: skip
def test_malformed_cost_curve_in_a_plan_is_refused(tmp_path, key, value):
    """The cost-versus-goodput chart read every row's goodput: a row without one was a KeyError in the HTML report,
    and a negative one was drawn."""
    doc = load_plan(PLAN)
    _edit(doc, ("analysis", "cost_vs_goodput", 0, key), value)
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps(doc))
    res = invoke("report", bad, "--format", "html")
    assert res.exit_code == 2, res.output
    assert "cost_vs_goodput" in res.output and key in res.output
