"""Kubernetes Jobs that profile each GPU type (hetplan profile --emit-job)."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.emit.profile_job import JobSettings, build_jobs
from tests.helpers import cli

runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


def test_one_valid_job_per_label(tmp_path):
    out = tmp_path / "jobs"
    res = invoke(
        "profile", "--emit-job", "--gpu-label", "NVIDIA-H100-80GB-HBM3", "--gpu-label", "My-New-GPU",
        "--out", out, "--pvc", "profiles", "--gpus-per-job", "8", "--quick",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    files = sorted(p.name for p in out.iterdir())
    assert files == ["hetplan-profile-my-new-gpu.yaml", "hetplan-profile-nvidia-h100-80gb-hbm3.yaml"]
    job = yaml.safe_load((out / files[1]).read_text())
    pod = job["spec"]["template"]["spec"]
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    script = container["args"][0]
    # the profiler package alone runs in the pod, with the model's shapes as flags (the pod has no catalog)
    assert script.startswith("set -e; pip install --quiet hetplan-profiler; hetplan-profile --device cuda:0 ")
    assert "--gpu H100-SXM" in script and "--quick" in script
    assert "--model Llama-3-8B --hidden-size 4096 --heads 32 --kv-heads 8 --head-dim 128 --ffn-size 14336" in script
    assert "--out /profiles/h100-sxm.yaml" in script and "# hetplan-profile-begin" in script
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "profiles"
    # 8 GPUs run the NCCL all-reduce: /dev/shm is a memory-backed volume, not the container's 64 MiB
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}} in pod["volumes"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    unknown = yaml.safe_load((out / files[0]).read_text())["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert "--gpu" not in unknown.replace("--gpu-", "")  # the pod matches an unknown device itself


def test_jobs_are_validated_and_bad_labels_refused():
    import pytest

    from hetplan.errors import InputError

    files = build_jobs(["NVIDIA-L4"], JobSettings())
    assert list(files) == ["hetplan-profile-nvidia-l4.yaml"]
    assert "/dev/shm" not in files["hetplan-profile-nvidia-l4.yaml"]  # one GPU: no all-reduce, no shm volume
    with pytest.raises(InputError):
        build_jobs(["not a label!"], JobSettings())
    with pytest.raises(InputError):
        build_jobs([], JobSettings())
    res = invoke("profile", "--gpu-label", "NVIDIA-L4")
    assert res.exit_code == 2 and "--emit-job" in res.output


def test_an_empty_gpu_label_is_refused_before_anything_is_written(tmp_path):
    """``--gpu-label ''`` wrote a Job selecting ``nvidia.com/gpu.product: ''`` (a valid label value that no GPU
    node carries: the Job would wait unscheduled), exit 0."""
    for labels in (("",), ("NVIDIA-L4", " ")):
        res = invoke("profile", "--emit-job", *(x for v in labels for x in ("--gpu-label", v)), "--out",
                     tmp_path / "jobs")  # fmt: skip
        assert res.exit_code == 2 and "--gpu-label '' is empty" in res.output, res.output
        assert not (tmp_path / "jobs").exists()


def test_jobs_print_to_stdout_without_out():
    res = invoke("profile", "--emit-job", "--gpu-label", "NVIDIA-L4")
    assert res.exit_code == 0, res.output
    assert yaml.safe_load(res.stdout)["kind"] == "Job"


def test_an_invalid_job_is_caught_before_writing(monkeypatch):
    import pytest

    from hetplan.emit import profile_job as job_mod
    from hetplan.errors import InputError

    real = job_mod.build_job

    def broken(value, s, catalog=None):
        name, obj = real(value, s, catalog)
        obj["spec"]["template"]["spec"]["containers"][0]["resources"]["limitz"] = {}
        return name, obj

    monkeypatch.setattr(job_mod, "build_job", broken)
    with pytest.raises(InputError) as exc:
        build_jobs(["NVIDIA-L4"], JobSettings())
    assert "limitz" in exc.value.why
