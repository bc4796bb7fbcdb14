"""Every target on several plans: offline validation passes, and the files deploy exactly what the plan says."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from typing import Any

import pytest

from hetplan.emit.settings import DEFAULT_GPU_LABELS, EmitSettings
from hetplan.emit.validate import validate_files
from hetplan.emit.vllm import serve_argv
from tests.emit.helpers import (
    aggregated,
    all_docs,
    combo,
    docs,
    example_plan,
    files_of,
    ir_of,
    plan_doc,
    two_combo_plan,
)

BOTH = EmitSettings(dynamo_api_versions=("v1beta1", "v1alpha1"), router_image="registry.local/vllm-router:0.1")


def _cases() -> dict[str, tuple[dict[str, Any], EmitSettings]]:
    return {
        # mixed prefill/decode GPU types, two combos (A100 TP2 -> A10G TP8, H100 TP2 -> A100 TP4)
        "mixed-a": (two_combo_plan(), BOTH),
        # mixed H800 prefill -> H20 decode, 8:1
        "mixed-b": (example_plan("cauchy-h800-a800-h20"), BOTH),
        # homogeneous A100 -> A100, HPA instead of KEDA (example (b)'s H800-only fleet no longer fits its inventory)
        "homogeneous": (example_plan("llama3-70b-azure-conv", "homogeneous"), replace(BOTH, autoscaler="hpa")),
        # Mélange: aggregated instances on two GPU types
        "aggregated": (example_plan("llama3-70b-azure-conv", "melange"), BOTH),
        # TP8 instances on 4-GPU nodes: every instance spans two nodes (LeaderWorkerSet, Ray)
        "multi-node": (
            plan_doc([combo("H100-SXM", 8, 1, "A100-80GB-SXM", 8, 2, count=2)], model="Llama-3-70B", name="mn"),
            replace(BOTH, gpus_per_node=4),
        ),
        # pipeline parallelism (TP2 x PP2) on aggregated instances: vLLM's NixlConnector moves no KV with PP > 1
        "pipeline": (
            plan_doc(instances=[aggregated("L40S", 2, 3, pp=2)], model="Llama-3-70B", name="pp"),
            BOTH,
        ),
    }


CASES = list(_cases())


@pytest.fixture(scope="module")
def emitted() -> dict[str, tuple[dict[str, Any], EmitSettings, dict[str, str]]]:
    return {name: (plan, s, files_of(plan, s)) for name, (plan, s) in _cases().items()}


@pytest.fixture(scope="module")
def reports(emitted):
    return {name: validate_files(files, "1.33") for name, (_, _, files) in emitted.items()}


@pytest.mark.parametrize("case", CASES)
def test_every_target_validates_offline(case, emitted, reports):
    report = reports[case]
    assert report.ok, report.errors
    kinds = report.by_kind()
    files = emitted[case][2]
    assert {p.split("/")[0] for p in files} == {"vllm", "kubernetes", "llmd", "dynamo"}
    assert kinds["DynamoGraphDeployment"] == 2 * len([p for p in files if p.endswith(".v1beta1.yaml")])
    assert kinds["InferencePool"] == len([p for p in files if p.startswith("llmd/") and p.endswith(".yaml")])
    assert report.scripts and all(p.startswith("vllm/") for p in report.scripts)
    assert "admission webhooks" in report.not_checked[0] and any("CEL" in x for x in report.not_checked)


def _plan_gpus(plan: dict[str, Any]) -> dict[str, int]:
    return {k: int(v) for k, v in plan["gpus_used"].items()}


def _gpu_of(labels: dict[str, str]) -> str:
    return labels["hetplan.io/gpu"]


@pytest.mark.parametrize("case", CASES)
def test_kubernetes_requests_exactly_the_planned_gpus(case, emitted):
    plan, s, files = emitted[case]
    used: dict[str, int] = {}
    for d in all_docs(files, "kubernetes/"):
        if d["kind"] == "Deployment" and "hetplan.io/gpu" in d["metadata"]["labels"]:
            pod = d["spec"]["template"]["spec"]
            gpus, pods = int(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]), 1
        elif d["kind"] == "LeaderWorkerSet":
            lwt = d["spec"]["leaderWorkerTemplate"]
            pod, pods = lwt["leaderTemplate"]["spec"], lwt["size"]
            gpus = int(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
            assert int(lwt["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]) == gpus
        else:
            continue
        assert isinstance(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"], str)
        gpu = _gpu_of(d["metadata"]["labels"])
        assert _selector_gpu(pod["nodeSelector"], plan) == gpu
        used[gpu] = used.get(gpu, 0) + d["spec"]["replicas"] * pods * gpus
    assert used == _plan_gpus(plan)


def _selector_gpu(selector: dict[str, str], plan) -> str:
    """The GPU a node selector picks: the purchased instance type's GPU (issue 14: rented groups are placed by
    ``node.kubernetes.io/instance-type``), or the GPU label (owned nodes, plans without purchases)."""
    assert len(selector) == 1
    key, value = next(iter(selector.items()))
    if key == "node.kubernetes.io/instance-type":
        lines = plan["purchase"] if isinstance(plan, dict) else [vars(p) for p in plan.purchase]
        return next(p["gpu"] for p in lines if p["instance_type"] == value and not p["owned"])
    assert key == EmitSettings().label_key
    return {v: k for k, v in DEFAULT_GPU_LABELS.items()}[value]


@pytest.mark.parametrize("case", CASES)
def test_llmd_and_dynamo_request_exactly_the_planned_gpus(case, emitted):
    plan, _, files = emitted[case]
    llmd: dict[str, int] = {}
    for d in all_docs(files, "llmd/"):
        if d["kind"] == "DisaggregatedSet":
            assert [r["name"] for r in d["spec"]["roles"]] == ["prefill", "decode"]
            for role in d["spec"]["roles"]:
                lwt = role["spec"]["leaderWorkerTemplate"]
                pod = (lwt.get("leaderTemplate") or lwt["workerTemplate"])["spec"]
                gpu = _gpu_of(lwt["workerTemplate"]["metadata"]["labels"])
                n = d["spec"]["slices"] * role["spec"]["replicas"] * lwt["size"]
                llmd[gpu] = llmd.get(gpu, 0) + n * int(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
        elif d["kind"] == "LeaderWorkerSet":
            lwt = d["spec"]["leaderWorkerTemplate"]
            pod = lwt["workerTemplate"]["spec"]
            gpu = _gpu_of(lwt["workerTemplate"]["metadata"]["labels"])
            n = d["spec"]["replicas"] * lwt["size"] * int(pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
            llmd[gpu] = llmd.get(gpu, 0) + n
    assert llmd == _plan_gpus(plan)
    beta: dict[str, int] = {}
    alpha: dict[str, int] = {}
    for d in all_docs(files, "dynamo/"):
        if d["apiVersion"] == "nvidia.com/v1beta1":
            assert d["spec"]["components"][0]["type"] == "frontend"
            for c in d["spec"]["components"][1:]:
                spec = c["podTemplate"]["spec"]
                gpu = _selector_gpu(spec["nodeSelector"], plan)
                per_pod = int(spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
                beta[gpu] = beta.get(gpu, 0) + c["replicas"] * c.get("multinode", {}).get("nodeCount", 1) * per_pod
        else:
            assert d["spec"]["services"]["Frontend"]["componentType"] == "frontend"
            for svc in list(d["spec"]["services"].values())[1:]:
                assert svc["componentType"] == "worker"
                gpu = _selector_gpu(svc["extraPodSpec"]["nodeSelector"], plan)
                nodes = svc.get("multinode", {}).get("nodeCount", 1)
                alpha[gpu] = alpha.get(gpu, 0) + svc["replicas"] * nodes * int(svc["resources"]["limits"]["gpu"])
    assert beta == alpha == _plan_gpus(plan)


def _script_argv(text: str) -> list[str]:
    exec_line = text[text.index("exec vllm serve") :].replace("\\\n", " ")
    return shlex.split(exec_line.splitlines()[0])[1:]


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("case", CASES)
def test_vllm_scripts_carry_the_plan(case, emitted):
    plan, s, files = emitted[case]
    ir = ir_of(plan, s)
    for g in ir.groups:
        path = f"vllm/{g.name}{'-leader' if g.multi_node else ''}.sh"
        argv = _script_argv(files[path])
        assert argv == serve_argv(ir, g)
        assert _flag(argv, "--tensor-parallel-size") == str(g.tp)
        assert ("--pipeline-parallel-size" in argv) == (g.pp > 1)
        assert ("--distributed-executor-backend" in argv) == g.multi_node
        assert _flag(argv, "--block-size") == str(plan["scenario"]["perf_settings"]["block_size_tokens"])
        assert _flag(argv, "--gpu-memory-utilization") == "0.9"
        if g.role == "aggregated":
            assert "--kv-transfer-config" not in argv
        else:
            kv = json.loads(_flag(argv, "--kv-transfer-config"))
            role = {"prefill": "kv_producer", "decode": "kv_consumer"}[g.role]
            assert kv == {"kv_connector": "NixlConnector", "kv_role": role, "kv_buffer_device": "cuda"}
        if g.multi_node:
            assert f"-ge {g.nodes_per_instance} ]" in files[path]
            assert "ray start --address" in files[f"vllm/{g.name}-worker.sh"]
    for u in ir.units:
        router = files[f"vllm/{u.name}-router.sh"].replace("\\\n", " ")
        for g in u.groups:
            flag = {"prefill": "--prefill http://", "decode": "--decode http://", "aggregated": "http://"}[g.role]
            assert router.count(f"{flag}{g.name}-") == g.replicas


def test_multi_node_instances_use_leaderworkerset_and_ray(emitted):
    plan, s, files = emitted["multi-node"]
    lws = [d for d in all_docs(files, "kubernetes/") if d["kind"] == "LeaderWorkerSet"]
    assert len(lws) == 2 and all(d["spec"]["leaderWorkerTemplate"]["size"] == 2 for d in lws)
    assert sorted(d["spec"]["replicas"] for d in lws) == [2, 4]  # 1 prefill and 2 decode per copy, 2 copies
    leader = lws[0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    assert leader["command"] == ["/bin/bash", "-c"] and "--distributed-executor-backend ray" in leader["args"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == "4"
    scaled = [d for d in all_docs(files, "kubernetes/") if d["kind"] == "ScaledObject"]
    assert {d["spec"]["scaleTargetRef"]["kind"] for d in scaled} == {"LeaderWorkerSet"}
    dgd = docs(files["dynamo/mn-u0.v1beta1.yaml"])[0]
    assert [c.get("multinode") for c in dgd["spec"]["components"][1:]] == [{"nodeCount": 2}, {"nodeCount": 2}]
    assert all("--distributed-executor-backend" not in c["podTemplate"]["spec"]["containers"][0]["args"]
               for c in dgd["spec"]["components"][1:])  # fmt: skip


def test_autoscalers_hold_plan_derived_targets(emitted):
    plan, _, files = emitted["mixed-b"]
    ttft = plan["scenario"]["slo"]["ttft_s"]
    objects = [d for d in all_docs(files, "kubernetes/") if d["kind"] == "ScaledObject"]
    assert len(objects) == 2 * len(plan["combos"])  # a prefill and a decode autoscaler per combo (unit u<i>)
    for i, c in enumerate(plan["combos"]):
        scaled = {d["metadata"]["labels"]["hetplan.io/role"]: d for d in objects
                  if d["metadata"]["labels"]["hetplan.io/unit"] == f"u{i}"}  # fmt: skip
        prefill, decode = scaled["prefill"]["spec"], scaled["decode"]["spec"]
        assert prefill["minReplicaCount"] == c["n_prefill"] * c["count"]
        threshold = str(max(1, int(c["prefill_capacity_req_per_s"] * ttft)))
        assert prefill["triggers"][0]["metadata"]["threshold"] == threshold
        assert decode["triggers"][0]["metadata"]["threshold"] == str(c["decode_batch"])
        assert "vllm:num_requests_running" in decode["triggers"][0]["metadata"]["query"]
        # inventory 32 per type: max = planned + spare GPUs of the type / GPUs per instance
        gpu = c["prefill_gpu"]
        spare = plan["scenario"]["inventory"][gpu] - plan["gpus_used"][gpu]
        assert prefill["maxReplicaCount"] == prefill["minReplicaCount"] + spare // c["prefill_tp"]
    hpa = [d for d in all_docs(emitted["homogeneous"][2], "kubernetes/") if d["kind"] == "HorizontalPodAutoscaler"]
    assert len(hpa) == 2 and all(h["spec"]["minReplicas"] <= h["spec"]["maxReplicas"] for h in hpa)


def test_router_pods_follow_goodput_shares(emitted):
    plan, _, files = emitted["mixed-a"]
    deployments = [d for d in all_docs(files, "kubernetes/") if d["kind"] == "Deployment"]
    routers = [d for d in deployments if d["metadata"]["name"].endswith("-router")]
    shares = [c["goodput_req_per_s"] * c["count"] for c in plan["combos"]]
    replicas = [r["spec"]["replicas"] for r in routers]
    assert sum(replicas) == 10
    assert replicas.index(max(replicas)) == shares.index(max(shares))
    args = routers[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--vllm-pd-disaggregation" in args and "hetplan.io/unit=u0" in args and "hetplan.io/unit=u1" not in args


def test_llmd_decode_pods_carry_the_routing_sidecar(emitted):
    _, _, files = emitted["mixed-b"]
    dset = [d for d in all_docs(files, "llmd/") if d["kind"] == "DisaggregatedSet"][0]
    decode = dset["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    sidecar = decode["initContainers"][0]
    assert sidecar["restartPolicy"] == "Always" and "--vllm-port=8200" in sidecar["args"]
    assert _flag(decode["containers"][0]["args"], "--port") == "8200"
    pool = [d for d in all_docs(files, "llmd/") if d["kind"] == "InferencePool"][0]
    assert pool["spec"]["targetPorts"] == [{"number": 8000}]
    assert pool["spec"]["selector"]["matchLabels"]["llm-d.ai/inference-serving"] == "true"


def test_llmd_routes_for_cache_locality_only_for_a_plan_sized_with_prefix_reuse():
    import yaml

    plan = two_combo_plan()
    assert not any("prefix" in p for p in files_of(plan, targets=("llmd",)))
    plan["prefix_cache"] = {"source": "hash_ids", "by_instance": []}  # what a plan sized with reuse carries
    files = files_of(plan, targets=("llmd",))
    (cm,) = docs(files["llmd/epp-prefix-scoring.yaml"])
    config = yaml.safe_load(cm["data"]["epp-config.yaml"])
    assert config["kind"] == "EndpointPickerConfig"
    scorers = {p["pluginRef"]: p.get("weight") for p in config["schedulingProfiles"][0]["plugins"]}
    assert scorers["prefix-cache-scorer"] == scorers["queue-scorer"] == 1
    assert "## Prefix caching" in files["llmd/README.md"]
    assert validate_files(files).ok
