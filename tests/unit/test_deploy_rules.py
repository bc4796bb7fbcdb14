"""Deployability is a planner constraint (issue 15): one rule table (hetplan.deploy_rules) shared by the planner's
enumeration and by emit, and every plan hetplan prints passes ``emit --target all --validate``."""

from __future__ import annotations

import itertools

import pytest

from hetplan import api, deploy_rules
from hetplan.catalog.loader import find_model
from hetplan.deploy_rules import Deployment, Finding, InstanceShape, Rule, check_nixl_tp
from hetplan.emit.settings import EmitSettings
from hetplan.emit.validate import validate_files
from hetplan.errors import EmitRuleError, InfeasibleError
from hetplan.perf.arch import ModelArch
from hetplan.planning.request import build_request
from hetplan.scenario import Scenario, load_scenario
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from hetplan.solvers.melange import instance_types, make_buckets
from tests.conftest import EXAMPLES
from tests.emit.helpers import combo, files_of, plan_doc

CONV = str(EXAMPLES / "data" / "azure_conv_15min.csv")


def _scenario(**kw) -> Scenario:
    base = {"model": "Llama-3.1-8B", "workload": {"path": CONV}, "gpus": ["H100", "L4"], "cloud": "aws"}
    base.update(kw)
    return Scenario(**base)


def _plan_doc(scenario: Scenario, strategy: str = "cauchy") -> dict:
    return api.to_doc(api.plan(scenario, strategy=strategy, analysis=False))


def _deploys(doc: dict) -> None:
    """The plan emits for every target and the files validate offline (as ``emit --target all --validate``)."""
    files = files_of(doc, EmitSettings(router_image="registry.example/vllm-router:0.1"))
    report = validate_files(files)
    assert report.ok, report.errors


def _shape(tp: int) -> InstanceShape:
    arch = ModelArch(find_model("Llama-3-8B"))
    return InstanceShape(f"X TP{tp}", "combo 0", arch, "X", tp, 1, "auto", 16, None)


def test_nixl_needs_decode_tp_a_multiple_of_prefill_tp():
    dep = Deployment()
    assert check_nixl_tp(_shape(2), _shape(4), dep) is None
    assert check_nixl_tp(_shape(2), _shape(2), dep) is None
    bigger = check_nixl_tp(_shape(4), _shape(2), dep)
    assert bigger is not None and "here 4 > 2" in bigger.why
    odd = check_nixl_tp(_shape(2), _shape(3), dep)  # the P TP2 / D TP3 pair the planner used to accept
    assert odd is not None and "3 is not a multiple of 2" in odd.why
    assert check_nixl_tp(_shape(4), _shape(2), Deployment(kv_connector="MooncakeConnector")) is None


def test_planner_keeps_only_pairs_the_connector_accepts():
    for connector, ok in (("nixl", lambda p, d: d % p == 0), ("mooncake", lambda p, d: p == d)):
        req = build_request(_scenario(kv_connector=connector, goodput_req_per_s=4))[0]
        combos = enumerate_candidates(req, prune=False).combos
        assert combos and all(ok(c.prefill_tp, c.decode_tp) for c in combos)
        assert any(c.prefill_tp != c.decode_tp for c in combos) == (connector == "nixl")


def test_a_rule_added_to_the_table_changes_planner_and_emit(monkeypatch):
    def no_tp1(x: InstanceShape, dep: Deployment) -> Finding | None:
        if x.tp != 1:
            return None
        return Finding("no-tp1", f"{x.where}: TP 1", "this site runs no single-GPU instances", "use TP >= 2")

    def same_gpu(p: InstanceShape, d: InstanceShape, dep: Deployment) -> Finding | None:
        if p.gpu == d.gpu:
            return None
        return Finding("same-gpu", f"{p.unit}: {p.gpu} -> {d.gpu}", "mixed pairs are not allowed here", "re-plan")

    scenario = _scenario(goodput_req_per_s=4)
    req = build_request(scenario)[0]
    before = enumerate_candidates(req, prune=False)
    assert any(o.tp == 1 for o in before.options)
    assert any(c.prefill_gpu != c.decode_gpu for c in before.combos)
    mixed = plan_doc([combo("H100-SXM", 1, 1, "L4", 2, 1)])
    files_of(mixed)  # emits today
    monkeypatch.setattr(
        deploy_rules, "RULES", [*deploy_rules.RULES, Rule("no-tp1", "t", instance=no_tp1),
                                Rule("same-gpu", "t", pair=same_gpu)],
    )  # fmt: skip
    after = enumerate_candidates(req, prune=False)
    assert after.options and all(o.tp != 1 for o in after.options)
    assert after.combos and all(c.prefill_gpu == c.decode_gpu for c in after.combos)
    types = instance_types(req, make_buckets(req.stats))  # aggregated instances follow the instance rules too
    assert types and all(t.tp != 1 for t in types)
    with pytest.raises(EmitRuleError) as info:
        files_of(mixed)
    assert {v[0] for v in info.value.violations} == {"no-tp1", "same-gpu"}


def test_max_model_len_is_the_longest_kept_request_and_every_instance_holds_it():
    # issue 15: Llama-3.1-8B's 131072-token window on L4s planned, then failed to emit (fit at --max-model-len)
    scenario = _scenario(gpus=["L4", "A10G"])
    doc = _plan_doc(scenario)
    req, workload, _, _ = build_request(scenario)
    longest = int((workload.prompt_tokens + workload.output_tokens).max())
    assert doc["scenario"]["deployment"]["max_model_len_tokens"] == longest < 131072
    _deploys(doc)
    files = files_of(doc)
    serves = [t for p, t in files.items() if p.startswith("vllm/") and "vllm serve" in t]
    assert serves and all(f"--max-model-len {longest}" in t for t in serves)
    # a --max-model-len no instance can hold is infeasible in the planner, with the rule named
    huge = Deployment(max_model_len_tokens=10**7)
    from dataclasses import replace

    with pytest.raises(InfeasibleError) as info:
        enumerate_candidates(replace(req, deployment=huge))
    assert "[rule" not in info.value.what and "10000000-token sequence do not fit" in info.value.why


def test_example_b_at_8_req_s_no_longer_pairs_tp4_prefill_with_tp2_decode():
    # issue 15's report: this plan paired 8x A800 TP4 -> 1x H20 TP2 and 2x H20 TP8 -> 1x H20 TP2 (emit refused both).
    # Under the calibrated model (issue 13) 8 req/s no longer fits the owned fleet; at 7 req/s the plan again pairs
    # A800 TP4 prefill with H20 decode, which must now be TP4 (a multiple of the prefill TP under NIXL)
    scenario = load_scenario(EXAMPLES / "cauchy-h800-a800-h20.yaml")
    scenario = scenario.model_copy(
        update={"goodput_req_per_s": 7, "slo": scenario.slo.model_copy(update={"ttft": "2s"})}
    )
    doc = _plan_doc(scenario)
    assert doc["combos"] and all(c["decode_tp"] % c["prefill_tp"] == 0 for c in doc["combos"])
    _deploys(doc)


@pytest.mark.parametrize("strategy", ["cauchy", "homogeneous", "melange"])
@pytest.mark.parametrize("example", sorted(p.stem for p in EXAMPLES.glob("*.yaml")))
def test_every_example_plan_deploys(example, strategy):
    try:
        doc = _plan_doc(load_scenario(EXAMPLES / f"{example}.yaml"), strategy)
    except InfeasibleError:
        # the one shape an example cannot plan: no single GPU type of example (b)'s owned fleet holds its target
        assert (example, strategy) == ("cauchy-h800-a800-h20", "homogeneous")
        return
    _deploys(doc)


GRID_SMALL = list(
    itertools.product(
        ["Llama-3.1-8B", "Llama-3-70B"],
        [["H100", "L40S"], ["A100-80GB", "L4", "A10G"]],
        [("2s", "100ms"), ("800ms", "50ms")],
        [("bf16", "bf16"), ("fp8", "fp8")],
    )
)


def _grid_case(model, gpus, slo, dtypes, goodput=3.0):
    scenario = _scenario(model=model, gpus=gpus, slo={"ttft": slo[0], "tpot": slo[1]}, weight_dtype=dtypes[0],
                         kv_dtype=dtypes[1], goodput_req_per_s=goodput)  # fmt: skip
    try:
        doc = _plan_doc(scenario)
    except InfeasibleError:
        return False
    _deploys(doc)
    return True


@pytest.mark.slow
@pytest.mark.parametrize(("model", "gpus", "slo", "dtypes"), GRID_SMALL)
def test_grid_of_scenarios_deploys(model, gpus, slo, dtypes):
    """Models x GPU sets x SLOs x dtypes (16 scenarios): every plan found passes emit --target all --validate."""
    # every case of the grid is feasible today (measured: 16 of 16); a case that becomes infeasible fails here
    assert _grid_case(model, gpus, slo, dtypes), "no plan meets these SLOs on these GPUs (InfeasibleError)"


def test_grid_sample_deploys():
    """The quick loop's share of the grid: two scenarios, at least one feasible."""
    assert _grid_case("Llama-3.1-8B", ["A100-80GB", "L4", "A10G"], ("2s", "100ms"), ("bf16", "bf16")) or _grid_case(
        "Llama-3-70B", ["H100", "L40S"], ("2s", "100ms"), ("fp8", "fp8")
    )
