"""Node selection per provisioner (issue 33 item 4): each provisioner's own label key and values, Karpenter's and
EKS Auto Mode's GPU-memory floor, AKS's VM-size list, and a refused unknown label key."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.emit.settings import PROVISIONERS, EmitSettings
from hetplan.emit.validate import validate_files
from hetplan.errors import InputError
from hetplan.io import to_yaml
from tests.emit.helpers import all_docs, combo, files_of, plan_doc
from tests.helpers import cli

GPUS = ("H100-SXM", "A100-80GB-SXM", "L4")


def _plan():
    """A plan with one combo on each of H100, A100-80GB and L4 (prefill and decode on the same GPU type)."""
    return plan_doc([combo(gpu, 1, 1, gpu, 1, 1) for gpu in GPUS])


def _pod_specs(files):
    out = {}
    for d in all_docs(files, "kubernetes/"):
        if d["kind"] == "Deployment" and d["metadata"]["labels"].get("hetplan.io/gpu"):
            out[d["metadata"]["labels"]["hetplan.io/gpu"]] = d["spec"]["template"]["spec"]
    return out


def test_gke_writes_gke_accelerator_values():
    files = files_of(_plan(), EmitSettings(provisioner="gke"), ("kubernetes",))
    specs = _pod_specs(files)
    assert {g: s["nodeSelector"] for g, s in specs.items()} == {
        "H100-SXM": {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"},
        "A100-80GB-SXM": {"cloud.google.com/gke-accelerator": "nvidia-a100-80gb"},
        "L4": {"cloud.google.com/gke-accelerator": "nvidia-l4"},
    }
    assert all("affinity" not in s for s in specs.values())
    assert validate_files(files).ok


def test_gke_label_key_alone_picks_gke_values():
    """The old bug: --gpu-label-key cloud.google.com/gke-accelerator wrote GPU-feature-discovery values."""
    s = EmitSettings(gpu_label_key="cloud.google.com/gke-accelerator")
    assert s.label_for("H100-SXM") == "nvidia-h100-80gb"


@pytest.mark.slow
def test_karpenter_adds_a_gpu_memory_requirement():
    files = files_of(_plan(), EmitSettings(provisioner="karpenter"), ("kubernetes", "llmd", "dynamo"))
    specs = _pod_specs(files)
    a100 = specs["A100-80GB-SXM"]
    assert a100["nodeSelector"] == {"karpenter.k8s.aws/instance-gpu-name": "a100"}
    (term,) = a100["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expr,) = term["matchExpressions"]
    assert expr["key"] == "karpenter.k8s.aws/instance-gpu-memory" and expr["operator"] == "Gt"
    # more than 40 GB machines (p4d: 40,960 MiB) carry, at most what 80 GB ones (p4de: 81,920 MiB) carry
    assert 40960 < int(expr["values"][0]) < 81920
    l4 = specs["L4"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert int(l4["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]) < 22888  # g6's L4 as EC2 reports it
    report = validate_files(files)
    assert report.ok, report.errors


def test_aks_lists_vm_sizes_in_node_affinity():
    files = files_of(_plan(), EmitSettings(provisioner="aks", gpu_labels=(("L4", "Standard_NC8ads_L4"),)))
    specs = _pod_specs(files)
    h100 = specs["H100-SXM"]
    assert h100["nodeSelector"] == {"node.kubernetes.io/instance-type": "Standard_ND96isr_H100_v5"}
    assert specs["L4"]["nodeSelector"] == {"node.kubernetes.io/instance-type": "Standard_NC8ads_L4"}
    report = validate_files(files)
    assert report.ok, report.errors


def test_aks_several_vm_sizes_use_an_in_list():
    plan = plan_doc([combo("A100-80GB-PCIe", 1, 1, "A100-80GB-PCIe", 1, 1)])
    (spec,) = _pod_specs(files_of(plan, EmitSettings(provisioner="aks"), ("kubernetes",))).values()
    assert "nodeSelector" not in spec
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["operator"] == "In"
    assert "Standard_NC24ads_A100_v4" in term["matchExpressions"][0]["values"]


def test_every_provisioner_has_a_documented_source_and_valid_values():
    from hetplan.emit.names import is_label_key, is_label_value

    for p in PROVISIONERS.values():
        assert p.source and is_label_key(p.label_key)
        assert all(is_label_value(v) for values in p.values.values() for v in values), p.name


def test_aks_a10_lists_every_whole_gpu_vm_size():
    # NVadsA10 v5: NV36ads and NV36adms hold one A10, NV72ads two; a node pool of NV36adms was left out before
    assert PROVISIONERS["aks"].values["A10"] == (
        "Standard_NV36ads_A10_v5",
        "Standard_NV36adms_A10_v5",
        "Standard_NV72ads_A10_v5",
    )


def test_eks_and_aks_sources_name_the_documentation_pages():
    eks, aks = PROVISIONERS["eks"].source, PROVISIONERS["aks"].source
    assert "docs.aws.amazon.com/eks/latest/userguide/create-node-pool.html" in eks
    assert "EKS Auto Mode Supported Labels" in eks and "auto-odcr.html" in eks
    assert "learn.microsoft.com/azure/aks/use-labels" in aks and "kubernetes.azure.com/accelerator=nvidia" in aks


def test_a_gpu_the_provisioner_lacks_is_refused_naming_it():
    from hetplan.errors import EmitRuleError

    plan = plan_doc([combo("H20", 1, 1, "H20", 1, 1)])
    with pytest.raises(EmitRuleError, match="no node label value for GPU H20") as exc:
        files_of(plan, EmitSettings(provisioner="gke"))
    assert "gke" in exc.value.why


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (EmitSettings(gpu_label_key="example.com/gpu"), "--gpu-label-key 'example.com/gpu' is not a GPU label"),
        (  # one GPU of three without a value under the user's own key
            EmitSettings(gpu_label_key="example.com/gpu", gpu_labels=(("H100-SXM", "h"), ("L4", "l"))),
            "A100-80GB-SXM has no --gpu-label value",
        ),
        (EmitSettings(provisioner="nomad"), "unknown provisioner 'nomad'"),
        (
            EmitSettings(provisioner="karpenter", gpu_label_key="cloud.google.com/gke-accelerator"),
            "is gke's, not karpenter's",
        ),
    ],
)
def test_bad_provisioner_settings_are_input_errors(settings, message):
    with pytest.raises(InputError, match=message):
        files_of(_plan(), settings)


def test_own_label_key_with_every_value_given_is_used():
    labels = (("H100-SXM", "h100"), ("A100-80GB-SXM", "a100-80"), ("L4", "l4"))
    specs = _pod_specs(files_of(_plan(), EmitSettings(gpu_label_key="example.com/gpu", gpu_labels=labels)))
    assert specs["A100-80GB-SXM"]["nodeSelector"] == {"example.com/gpu": "a100-80"}


def test_cli_unknown_label_key_exits_2_naming_it(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(to_yaml(_plan()))
    res = CliRunner().invoke(
        app, cli(("emit", path, "--out", tmp_path / "o", "--gpu-label-key", "example.com/gpu")), env={"COLUMNS": "200"}
    )
    assert res.exit_code == 2
    assert "example.com/gpu" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "o").exists()


def test_cli_provisioner_gke(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text(to_yaml(_plan()))
    res = CliRunner().invoke(
        app,
        cli(("emit", path, "-o", tmp_path / "o", "-t", "kubernetes", "--provisioner", "gke", "--validate")),
        env={"COLUMNS": "200"},
    )
    assert res.exit_code == 0, res.output
    text = "".join(p.read_text() for p in (tmp_path / "o" / "kubernetes").glob("*.yaml"))
    assert "cloud.google.com/gke-accelerator: nvidia-h100-80gb" in text
    assert "nvidia.com/gpu.product" not in text
