"""Request classes (issue 32 item 3): a scenario's ``classes`` split the workload (by share or a trace column), the
planner holds each class to its own TTFT in the combos' prefill capacities (decode to the tightest TPOT) and says
what the tightest-SLO sizing would cost, the verification judges each class against its own SLOs, and the gate
fails when a class that held stops holding."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from pydantic import ValidationError

from hetplan.errors import InputError
from hetplan.plan.blocks import ClassSlo
from hetplan.plan.doc import load_plan, to_doc
from hetplan.planning.request import build_request, build_whole_workload, workload_sha256
from hetplan.report.gate import compare
from hetplan.scenario import Scenario
from hetplan.sim.verify import verify_plan
from hetplan.workload.classes import assign_classes, binding_slos, class_slos
from hetplan.workload.formats import read_azure_csv
from hetplan.workload.model import stream_from_workload
from hetplan.workload.split import time_split
from tests.conftest import FIXTURES

CHAT = {"name": "chat", "share": 0.7, "slo": {"ttft": "1s"}}
LONG = {"name": "long-output", "share": "30%", "slo": {"ttft": "4s", "tpot_s": 0.08}}


def _scenario(classes, **workload):
    sc = Scenario.model_validate(
        {
            "model": "Llama-3-70B",
            "workload": workload or {"path": "azure_conv_200.csv"},
            "goodput_req_per_s": 2,
            "slo": {"ttft": "2s", "tpot": "100ms"},
            "classes": classes,
        }
    )
    return sc.with_base_dir(str(FIXTURES))


def test_each_class_has_its_own_slos_and_sizing_takes_the_tightest_of_each():
    sc = _scenario([CHAT, LONG])
    assert class_slos(sc) == {"chat": (1.0, 0.1), "long-output": (4.0, 0.08)}
    assert binding_slos(sc) == (1.0, 0.08)  # TTFT of one class, TPOT of the other
    req = build_request(sc)[0]
    assert (req.ttft_slo_s, req.tpot_slo_s) == (1.0, 0.08)
    one = Scenario.model_validate({"model": "Llama-3-70B", "workload": {"path": "x.csv"}})
    assert binding_slos(one) is None and class_slos(one) == {}


def test_a_share_split_is_a_fixed_draw_that_survives_the_holdout_split():
    sc = _scenario([CHAT, LONG])
    a, b = build_whole_workload(sc), build_whole_workload(sc)
    assert a.class_labels is not None and np.array_equal(a.class_labels, b.class_labels)
    share = float((a.class_labels == "long-output").mean())
    assert 0.2 < share < 0.4 and set(a.class_labels.tolist()) == {"chat", "long-output"}
    sizing, held = time_split(a, 0.3)
    assert np.array_equal(np.concatenate([sizing.class_labels, held.class_labels]), a.class_labels)
    stream = stream_from_workload(sizing)
    assert stream.class_names == ("chat", "long-output")


def test_classes_by_value_read_the_trace_column(tmp_path):
    rows = (FIXTURES / "azure_conv_200.csv").read_text().splitlines()
    kinds = ["chat" if i % 3 else "batch" for i in range(len(rows) - 1)]
    text = "\n".join([rows[0] + ",kind"] + [f"{r},{k}" for r, k in zip(rows[1:], kinds, strict=True)])
    (tmp_path / "t.csv").write_text(text + "\n")
    sc = _scenario(
        [{"name": "c", "value": "chat"}, {"name": "b", "value": "batch", "slo": {"tpot": "50ms"}}],
        path=str(tmp_path / "t.csv"),
        class_column="kind",
    )
    wl = build_whole_workload(sc)
    assert wl.class_labels.tolist() == ["c" if k == "chat" else "b" for k in kinds]
    bad = _scenario([{"name": "c", "value": "chat"}], path=str(tmp_path / "t.csv"), class_column="kind")
    with pytest.raises(InputError, match="no class names"):
        build_whole_workload(bad)


def test_a_class_with_a_trace_of_its_own_adds_its_requests_on_their_own_clock():
    sc = _scenario([{"name": "chat", "slo": {"ttft": "1s"}}, {"name": "long", "path": "mooncake_300.jsonl"}])
    wl = build_whole_workload(sc)
    chat = read_azure_csv(FIXTURES / "azure_conv_200.csv")
    assert wl.n_requests == chat.n_requests + 300
    assert int((wl.class_labels == "long").sum()) == 300 and int((wl.class_labels == "chat").sum()) == 200
    assert wl.arrival_s[0] == 0.0 and np.all(np.diff(wl.arrival_s) >= 0)
    assert wl.arrival_rate_per_s == pytest.approx((wl.n_requests - 1) / wl.duration_s)
    assert sorted(wl.prompt_tokens[wl.class_labels == "chat"]) == sorted(chat.prompt_tokens)
    sha = workload_sha256(sc)
    assert sha is not None and sha != workload_sha256(_scenario([CHAT, LONG]))
    missing = _scenario([{"name": "chat"}, {"name": "long", "path": "nope.jsonl"}])
    with pytest.raises(InputError, match="nope.jsonl"):
        build_whole_workload(missing)


@pytest.mark.parametrize(
    ("classes", "workload", "message"),
    [
        ([{"name": "a", "share": 0.5}, {"name": "b", "share": 0.4}], {}, "sum to 0.9"),
        ([{"name": "a", "share": 0.5}, {"name": "a", "share": 0.5}], {}, "more than once"),
        ([{"name": "a", "share": 0.5}, {"name": "b", "value": "x"}], {}, "mix share and value"),
        ([{"name": "a", "value": "x"}], {}, "need workload.class_column"),
        ([{"name": "a", "share": 1, "value": "x"}], {}, "not several"),
        ([{"name": "a", "share": 0.5}, {"name": "b"}], {}, "mix share and value"),
        ([{"name": "a", "path": "y.csv"}], {}, "give one class without path"),
        ([{"name": "a"}, {"name": "b", "path": "y.csv"}], {"rate_per_s": 2}, "at its own rate"),
        ([{"name": "a", "share": 1, "slo": {"tpot": 50}}], {}, "no unit"),
    ],
)
def test_bad_classes_are_refused_naming_the_fix(classes, workload, message):
    with pytest.raises(ValidationError, match=message):
        _scenario(classes, **({"path": "x.csv"} | workload))


@pytest.fixture(scope="module")
def checked():
    """plan_two_combos with two classes (each SLO loose enough to hold), verified on the classed trace."""
    base = load_plan(FIXTURES / "plan_two_combos.json")
    wl = assign_classes(read_azure_csv(FIXTURES / "azure_conv_200.csv"), _scenario([CHAT, LONG]), None)

    def plan_with(chat_ttft_s: float, long_tpot_s: float):
        classes = [
            {"name": "chat", "ttft_s": chat_ttft_s, "tpot_s": 0.1, "share": 0.7},
            {"name": "long-output", "ttft_s": 4.0, "tpot_s": long_tpot_s, "share": 0.3},
        ]
        plan = replace(base, classes=tuple(ClassSlo.from_doc(c) for c in classes))
        v = verify_plan(plan, wl, capacity=False)
        return replace(plan, verification=v), v

    return plan_with


def test_verification_judges_each_class_against_its_own_slos(checked):
    _, v = checked(2.0, 0.08)
    assert v.status == "verified", v.verdict
    classes = v.classes or []
    assert [c.class_ for c in classes] == ["chat", "long-output"]
    assert all(c.holds for c in classes) and v.jain_index is not None
    assert classes[1].tpot_slo_s == 0.08 and classes[0].ttft_slo_s == 2.0
    assert "class chat" in (v.verdict or "") and "class long-output" in (v.verdict or "")


@pytest.mark.parametrize(("chat_ttft_s", "long_tpot_s", "failing"), [(1e-4, 0.08, "chat"), (2.0, 1e-4, "long-output")])
def test_the_gate_fails_when_either_class_stops_holding(checked, chat_ttft_s, long_tpot_s, failing):
    baseline, _ = checked(2.0, 0.08)
    current, v = checked(chat_ttft_s, long_tpot_s)
    assert v.status == "not verified"
    assert [c.class_ for c in v.classes or [] if not c.holds] == [failing]
    assert all(m.split(": ")[1] == f"class {failing}" for m in v.misses if "class" in m)
    result = compare(current, to_doc(baseline), 0.05, name="s")
    assert not result.passed
    assert any(f.startswith(f"class {failing} held its SLOs in the baseline") for f in result.failures)
    same = compare(baseline, to_doc(baseline), 0.05, name="s")
    assert same.passed


def test_the_report_shows_each_class_against_its_own_slos(checked):
    from hetplan.plan.types import Slo
    from hetplan.report.model import verification_report
    from hetplan.report.render.common import verification_rows

    _, v = checked(1e-4, 0.08)
    rep = verification_report(v, Slo(ttft_s=2.0, tpot_s=0.1, percentile=90))
    assert [c.class_ for c in rep.classes or ()] == ["chat", "long-output"]
    rows = dict(map(tuple, verification_rows(rep)))
    assert rows["class chat"].startswith("misses: attainment ") and "TTFT" in rows["class chat"]
    assert rows["class long-output"].startswith("holds: attainment ")
    assert "TPOT" in rows["class long-output"] and "80 ms" in rows["class long-output"]


def test_an_slo_flag_no_class_would_see_is_refused_not_ignored():
    from typer.testing import CliRunner

    from hetplan.cli.main import app
    from hetplan.workload.classes import check_slo_override
    from tests.conftest import EXAMPLES

    own = [{"name": "a", "slo": {"ttft": "1s"}}, {"name": "b", "slo": {"ttft": "4s", "tpot": "60ms"}}]
    with pytest.raises(InputError, match="every request class of the scenario sets its own ttft"):
        check_slo_override(own, "ttft", "--ttft")
    check_slo_override(own, "tpot", "--tpot")  # class a takes the scenario's tpot: the flag applies to it
    check_slo_override(None, "ttft", "--ttft")  # one class: the flag is the SLO
    res = CliRunner().invoke(
        app, ["plan", str(EXAMPLES / "two-class.yaml"), "--ttft", "500ms", "--no-verify"], env={"NO_COLOR": "1"}
    )
    assert res.exit_code == 2 and "--ttft changes slo.ttft" in res.output and "Traceback" not in res.output


def _two_class_inputs(with_trace: bool):
    """Length stats of two classes: ``short`` (prompts ~300 tokens, 70 %) and ``long`` (~6,000 tokens, 30 %),
    in a random order, and optionally their arrivals; one H100 TP2 and one A100 TP4 prefill instance."""
    from hetplan.catalog.loader import find_gpu, find_model
    from hetplan.perf.arch import ModelArch
    from hetplan.perf.capacity_inputs import ArrivalTrace, LengthStats
    from hetplan.perf.latency import InstanceModel

    rng = np.random.default_rng(3)
    n = 600
    labels = np.where(rng.random(n) < 0.7, "short", "long")
    prompts = np.where(labels == "short", rng.integers(200, 400, n), rng.integers(5000, 7000, n))
    outputs = rng.integers(50, 300, n)
    stats = LengthStats(prompts, outputs, 0.9, class_labels=labels)
    trace = None
    if with_trace:
        arrivals = np.sort(rng.uniform(0, 300, n))
        trace = ArrivalTrace(arrivals, prompts, n / float(arrivals[-1]), 3.0, outputs, class_labels=labels)
    arch = ModelArch(find_model("Llama-3-70B"))
    items = [(InstanceModel(arch, find_gpu(g), tp), 50e9) for g, tp in (("H100", 2), ("A100-80GB", 4))]
    return items, stats, trace


@pytest.mark.parametrize("with_trace", [False, True])
def test_per_class_prefill_capacity_holds_each_class_to_its_own_ttft(with_trace):
    from hetplan.perf.capacity import class_prefill_capacities, prefill_capacities

    items, stats, trace = _two_class_inputs(with_trace)
    short, long_ = stats.class_labels == "short", stats.class_labels == "long"
    t_short = None if trace is None else trace.class_labels == "short"
    t_long = None if trace is None else trace.class_labels == "long"
    per_class = class_prefill_capacities(items, stats, [("short", 0.5), ("long", 4.0)], trace, 4)
    own_short = prefill_capacities(items, stats, 0.5, trace, 4, short, t_short)
    own_long = prefill_capacities(items, stats, 4.0, trace, 4, long_, t_long)
    tightest = prefill_capacities(items, stats, 0.5, trace, 4)  # every request held to the tightest TTFT
    for got, a, b, tight in zip(per_class, own_short, own_long, tightest, strict=True):
        # the combo's capacity: the rate at which both classes hold, each judged on its own requests
        assert got.rate_by_n == tuple(min(x, y) for x, y in zip(a.rate_by_n, b.rate_by_n, strict=True))
        # the long prompts alone cannot reach a 0.5 s TTFT: held to the tightest SLO, the mix is unplannable
        # (or nearly so); per class, the short class's 0.5 s and the long class's 4 s are both met
        assert got.rate_per_s > 0 and got.rate_per_s > 2 * tight.rate_per_s
    # one class over every request is the single-SLO capacity, bit for bit
    every = np.full(stats.prompt_tokens.size, "all")
    one = replace(stats, class_labels=every)
    one_trace = None if trace is None else replace(trace, class_labels=every)
    alone = class_prefill_capacities(items, one, [("all", 4.0)], one_trace, 4)
    assert [replace(c, binding_class=None) for c in alone] == prefill_capacities(items, stats, 4.0, trace, 4)
    assert {c.binding_class for c in alone} == {"all"}


def test_the_planner_sizes_combos_per_class():
    from hetplan.solvers.cauchy_candidates import combo_prefill_capacities

    req = build_request(_scenario([CHAT, LONG]))[0]
    assert req.class_slos == (("chat", 1.0, 0.1), ("long-output", 4.0, 0.08))
    assert req.stats.class_labels is not None and req.arrivals is not None and req.arrivals.class_labels is not None
    assert set(req.stats.class_labels.tolist()) == {"chat", "long-output"}
    from hetplan.catalog.loader import find_gpu
    from hetplan.perf.latency import InstanceModel

    items = [(InstanceModel(req.arch, find_gpu("H100"), 4, 1, req.settings), 50e9)]
    got = combo_prefill_capacities(req, items)
    tight = combo_prefill_capacities(replace(req, class_slos=()), items)  # the rule before: 1 s over every request
    assert got != tight
    from hetplan.perf.capacity import class_prefill_capacities

    assert got == class_prefill_capacities(items, req.stats, [("chat", 1.0), ("long-output", 4.0)], req.arrivals,
                                           req.max_ratio)  # fmt: skip


def test_the_plan_says_what_the_tightest_slo_sizing_would_cost():
    from hetplan.planning.solve import Planner
    from hetplan.planning.whatif import tightest_sizing_note

    req, workload, _, _ = build_request(_scenario([CHAT, LONG]))
    assert tightest_sizing_note(replace(req, class_slos=()), workload, "cauchy", 10.0) is None  # one class
    assert tightest_sizing_note(req, workload, "melange", 10.0) is None  # sized on the tightest SLOs anyway
    tight = Planner(replace(req, class_slos=())).solve("cauchy")
    note = tightest_sizing_note(req, workload, "cauchy", 10.0)
    assert note is not None and note.startswith("request classes sized per class")
    assert f"held to the tightest SLOs (TTFT 1 s, TPOT 80 ms) the cauchy plan would cost ${tight.cost:.2f}/h" in note


def test_a_class_no_instance_serves_in_time_is_named_with_its_own_ttft():
    from hetplan.errors import InfeasibleError
    from hetplan.solvers.cauchy_candidates import enumerate_candidates

    tight_long = {"name": "long-output", "share": "30%", "slo": {"ttft": "5ms", "tpot_s": 0.08}}
    req = build_request(_scenario([CHAT, tight_long]))[0]
    with pytest.raises(InfeasibleError) as err:
        enumerate_candidates(req)
    assert err.value.why.startswith("class long-output's TTFT SLO 0.005 s binds: the fastest idle p90 TTFT")
    assert "over its requests" in err.value.why and "slo.ttft" in err.value.fix
