"""``hetplan emit`` on the command line: output, --json, exit codes and messages (console width pinned)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.io import to_yaml
from tests.emit.helpers import combo, example_plan, plan_doc, two_combo_plan
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "200", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plans")
    paths = {}
    for name, doc in {
        "a": two_combo_plan(),
        "b": example_plan("cauchy-h800-a800-h20"),
        "bad-tp": plan_doc([combo("H100-SXM", 4, 1, "L40S", 2, 1)]),
        "v100": plan_doc([combo("V100-SXM2", 1, 1, "V100-SXM2", 1, 1)], model="Llama-2-7B"),
    }.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(to_yaml(doc))
    return paths


def test_emit_all_targets_with_validation(plans, tmp_path):
    res = invoke("emit", plans["b"], "--target", "all", "--out", tmp_path / "out", "--validate")
    assert res.exit_code == 0, res.output
    out = " ".join(res.stdout.split())  # printed through rich: long lines wrap between words at the width
    # per combo 3 vLLM scripts, 3 Kubernetes files, 1 llm-d and 1 Dynamo file, beside the shared ones (1 vLLM, 3
    # Kubernetes, 1 llm-d, 1 Dynamo); example (b)'s Cauchy plan has three combos today (H800 TP2 prefill -> H20 TP4,
    # -> H800 TP2 and -> H800 TP4 decode)
    n = len(example_plan("cauchy-h800-a800-h20")["combos"])
    assert n == 3, "the premise: the number of combos the counts below are for"
    vllm, k8s, llmd, dynamo = 3 * n + 1, 3 * n + 3, n + 1, n + 1
    total = vllm + k8s + llmd + dynamo
    assert f"wrote {total} files to" in out
    assert f"(vllm {vllm}, kubernetes {k8s}, llmd {llmd}, dynamo {dynamo}) and manifest.json" in out
    # 11 Kubernetes objects per combo (Deployments, Services, ScaledObjects, llm-d and Dynamo resources), 4 shared
    assert f"validated offline: {11 * n + 4} objects" in out and "all passed" in out
    assert "not checked offline:" in out and "admission webhooks" in out and "CEL rules" in out
    assert "scheduling" in out and "image pulls" in out
    assert "router image 'vllm-router:latest' is a placeholder" in out
    assert (tmp_path / "out" / "manifest.json").is_file()


def test_emit_json_output(plans, tmp_path):
    res = invoke("emit", plans["a"], "-t", "kubernetes,llmd", "-o", tmp_path / "o", "--validate", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["targets"] == ["kubernetes", "llmd"]
    assert {f["target"] for f in doc["files"]} == {"kubernetes", "llmd"}
    assert doc["validation"]["ok"] is True and doc["validation"]["errors"] == []
    assert doc["validation"]["by_kind"]["DisaggregatedSet"] == 2
    assert doc["validation"]["kubernetes_version"] == "1.33"
    written = json.loads((tmp_path / "o" / "manifest.json").read_text())
    assert [f["file"] for f in written["files"]] == sorted(f["file"] for f in doc["files"])


def test_emit_settings_reach_the_files(plans, tmp_path):
    res = invoke(
        "emit", plans["b"], "-t", "kubernetes", "-o", tmp_path, "--namespace", "serving", "--image",
        "registry.example/vllm:v0.11.0", "--gpu-label-key", "example.com/gpu", "--gpu-label", "H20=H20-96G",
        "--gpu-label", "A800-80GB-SXM=A800-80G", "--gpu-label", "H800-SXM=H800-80G", "--autoscaler", "hpa",
        "--validate",
    )  # fmt: skip  # a key of the user's own: every GPU's value is given (issue 33: none is guessed)
    assert res.exit_code == 0, res.output
    # example (b)'s decode GPUs depend on the performance model (H20, A800 or H800 over the refits): every decode
    # file of an H20 or A800 decode pool carries the label given for it, and at least one such file is written
    labels = {"h20": "H20-96G", "a800-80gb-sxm": "A800-80G"}
    decodes = sorted((tmp_path / "kubernetes").glob("cauchy-h800-a800-h20-u*-decode-*.yaml"))
    labelled = [(d, label) for d in decodes for gpu, label in labels.items() if d.name.endswith(f"-{gpu}.yaml")]
    assert labelled, [d.name for d in decodes]
    for decode, label in labelled:
        text = decode.read_text()
        assert "namespace: serving" in text and "image: registry.example/vllm:v0.11.0" in text
        assert f"example.com/gpu: {label}" in text and "kind: HorizontalPodAutoscaler" in text


def test_rule_violation_exits_1_with_the_rule(plans, tmp_path):
    res = invoke("emit", plans["bad-tp"], "-o", tmp_path / "x")
    assert res.exit_code == 1
    assert "Error: combo 0 pairs prefill TP 4 (H100-SXM) with decode TP 2 (L40S) under NixlConnector" in res.output
    assert "[rule nixl-tp]" in res.output and "To fix:" in res.output
    assert not (tmp_path / "x").exists()  # nothing written


def test_unknown_gpu_label_then_given(plans, tmp_path):
    res = invoke("emit", plans["v100"], "-t", "kubernetes", "-o", tmp_path)
    assert res.exit_code == 1 and "[rule gpu-label]" in res.output and "--gpu-label V100-SXM2=VALUE" in res.output
    res = invoke("emit", plans["v100"], "-t", "kubernetes", "-o", tmp_path, "--gpu-label", "v100=Tesla-V100-SXM2-32GB")
    assert res.exit_code == 0, res.output


def test_existing_output_needs_force(plans, tmp_path):
    assert invoke("emit", plans["b"], "-t", "vllm", "-o", tmp_path).exit_code == 0
    res = invoke("emit", plans["b"], "-t", "vllm", "-o", tmp_path)
    assert res.exit_code == 2 and "already exists" in res.output and "--force" in res.output
    assert invoke("emit", plans["b"], "-t", "vllm", "-o", tmp_path, "--force").exit_code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("-t", "helm"), "unknown target 'helm'"),
        (("--kv-connector", "p2p"), "--kv-connector 'p2p' is not known"),
        (("--dynamo-api", "v2"), "--dynamo-api 'v2' is not known"),
        (("--gpu-label", "H20"), "--gpu-label: cannot read 'H20'"),
        (("--gpu-label", "H2000=X"), "unknown GPU 'H2000'"),
        (("--namespace", "Prod"), "namespace 'Prod' is not a DNS-1123 label"),
        (("--validate", "--kubernetes-version", "1.2"), "no Kubernetes 1.2 schemas in kubernetes-validate"),
    ],
)
def test_bad_usage_exits_2(plans, tmp_path, args, message):
    res = invoke("emit", plans["b"], "-o", tmp_path / "o", *args)
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not (tmp_path / "o").exists()


def test_not_a_plan_exits_2(tmp_path):
    bad = tmp_path / "scenario.yaml"
    bad.write_text("schema_version: 1\nkind: scenario\n")
    res = invoke("emit", bad, "-o", tmp_path / "o")
    assert res.exit_code == 2 and "is not a usable hetplan plan" in res.output
