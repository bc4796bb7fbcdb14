"""hetplan calibrate-perf (hetplan/perf/user_calibration.py): the four input formats, the fit, leave-one-out, the
calibration file, its use by estimate and plan, and bad input. Fixtures: tests/fixtures/user_calibration/README.md
(hand-made after each tool's schema)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.errors import InputError
from hetplan.perf import user_calibration as uc
from hetplan.perf.error_bands import error_band
from hetplan.perf.settings import PerfCorrection, PerfSettings
from hetplan.plan.settings_doc import settings_from_doc, settings_to_doc
from tests.helpers import cli

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "user_calibration"
ALL = [FIX / n for n in ("vllm_bench_c16.json", "guidellm_report.json", "aiperf_profile_export_aiperf.json",
                         "points_measured.csv")]  # fmt: skip
runner = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}


def invoke(*args):
    return runner.invoke(app, cli(args), env=ENV)


def test_vllm_bench_fields_and_metadata():
    (p,) = uc.read_benchmarks([FIX / "vllm_bench_c16.json"], uc.Context())[0]
    assert p.row["gpu"] == "H100-SXM" and p.row["tp"] == "1" and p.row["engine"] == "vllm"
    assert (p.row["concurrency"], p.row["isl"], p.row["osl"]) == ("16", "1000", "200")
    assert (p.ttft_ms, p.tpot_ms) == (129.6, 12.4)


def test_guidellm_concurrent_benchmarks_and_open_loop_skipped():
    points, notes = uc.read_benchmarks([FIX / "guidellm_report.json"], uc.Context(gpu="H100-SXM"))
    assert [p.row["concurrency"] for p in points] == ["8", "32"]
    assert points[0].tpot_ms == 10.9  # inter_token_latency_ms, not time_per_output_token_ms (includes TTFT)
    assert len(notes) == 1 and "constant is open-loop" in notes[0]


def test_aiperf_json_and_csv():
    (j,) = uc.read_benchmarks([FIX / "aiperf_profile_export_aiperf.json"], uc.Context(gpu="H100-SXM"))[0]
    assert (j.row["concurrency"], j.ttft_ms, j.tpot_ms) == ("1", 90.8, 9.7)
    ctx = uc.Context(gpu="H100-SXM", model="Llama-3.1-8B", concurrency=32)
    (c,) = uc.read_benchmarks([FIX / "aiperf_profile_export_aiperf.csv"], ctx)[0]
    assert (c.row["isl"], c.row["osl"], c.ttft_ms, c.tpot_ms) == ("1000", "200", 142.5, 14.9)


def test_genai_perf_json_metrics_at_the_top_level(tmp_path):
    doc = json.loads((FIX / "aiperf_profile_export_aiperf.json").read_text())
    genai = {**doc["records"], "input_config": {"model": ["meta-llama/Llama-3.1-8B"], "concurrency": 4}}
    f = tmp_path / "profile_export_genai_perf.json"
    f.write_text(json.dumps(genai))
    (p,) = uc.read_benchmarks([f], uc.Context(gpu="H100-SXM"))[0]
    assert (p.row["concurrency"], p.row["model"], p.ttft_ms) == ("4", "meta-llama/Llama-3.1-8B", 90.8)
    genai["time_to_first_token"] = {**genai["time_to_first_token"], "unit": "s"}
    f.write_text(json.dumps(genai))
    with pytest.raises(InputError, match="expected ms"):
        uc.read_benchmarks([f], uc.Context(gpu="H100-SXM"))


def test_points_csv_keeps_each_rows_gpu_over_the_flag():
    points, _ = uc.read_benchmarks([FIX / "points_measured.csv"], uc.Context(gpu="H100-SXM"))
    assert [p.row["gpu"] for p in points] == ["H100-SXM", "H100-SXM", "H200-SXM"]
    assert points[1].ttft_ms == 214.0


def test_served_model_name_replaced_by_model_flag(tmp_path):
    doc = json.loads((FIX / "vllm_bench_c16.json").read_text())
    doc["model_id"] = "my-served-llama"
    f = tmp_path / "run.json"
    f.write_text(json.dumps(doc))
    (p,) = uc.read_benchmarks([f], uc.Context(model="Llama-3.1-8B"))[0]
    assert p.row["model"] == "Llama-3.1-8B"


@pytest.mark.parametrize(
    "edit,needle",
    [
        ({"max_concurrency": None}, "open-loop"),
        ({"mean_ttft_ms": -3}, "mean_ttft_ms must be a positive"),
        ({"gpu": None}, "does not say the gpu"),
    ],
)
def test_vllm_bench_bad_input(tmp_path, edit, needle):
    doc = json.loads((FIX / "vllm_bench_c16.json").read_text())
    doc.update(edit)
    doc = {k: v for k, v in doc.items() if v is not None or k == "max_concurrency"}
    f = tmp_path / "run.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=needle):
        uc.read_benchmarks([f], uc.Context())


@pytest.mark.parametrize(
    "flags,needle",
    [
        (("--tp", "0"), "--tp: tp must be a whole number"),
        (("--dp-attention", "-1"), "--dp-attention: dp_attention must be a whole number"),
        (("--gpu", "Z9"), "unknown GPU 'Z9'"),
        (("--model", "Llama-9"), "unknown model 'Llama-9'"),
        (("--engine", "foo"), "unknown engine 'foo'"),
    ],
)
def test_a_bad_flag_is_refused_even_where_the_file_says_that_field(tmp_path, flags, needle):
    """The vllm bench JSON names its GPU, model and TP, so these flags were ignored and the run exited 0."""
    res = invoke("calibrate-perf", FIX / "vllm_bench_c16.json", *flags, "--out", tmp_path / "c.yaml")
    assert res.exit_code == 2, res.output
    assert needle in res.output and "Traceback" not in res.output
    assert not (tmp_path / "c.yaml").exists()


def test_unknown_format_and_missing_csv_column(tmp_path):
    f = tmp_path / "x.json"
    f.write_text('{"hello": 1}')
    with pytest.raises(InputError, match="not a benchmark file"):
        uc.read_benchmarks([f], uc.Context())
    g = tmp_path / "p.csv"
    g.write_text("model,gpu,concurrency,isl,osl,ttft_ms\nLlama-3.1-8B,H100-SXM,4,100,100,50\n")
    with pytest.raises(InputError, match="tpot_ms"):
        uc.read_benchmarks([g], uc.Context())


def test_shrinkage_moves_one_point_most_of_the_way_and_none_not_at_all():
    assert uc.shrunk_factor(np.array([]), "ttft") == 1.0
    one = uc.shrunk_factor(np.array([np.log(1.2)]), "ttft")
    many = uc.shrunk_factor(np.full(20, np.log(1.2)), "ttft")
    assert 1.0 < one < many < 1.2 + 1e-9
    assert many > 1.19


def test_fit_and_leave_one_out_on_fixtures():
    points, _ = uc.read_benchmarks(ALL, uc.Context(gpu="H100-SXM"))
    pred = uc.predict(points)
    fits = {(g.gpu, g.model, g.tp): g for g in uc.fit(pred)}
    h100 = fits[("H100-SXM", "Llama-3.1-8B", 1)]
    assert len(h100.index) == 6
    # every fixture runs slower than predicted: the factors are > 1 and the leave-one-out error below the raw one
    assert h100.ttft_factor > 1.05 and h100.tpot_factor > 1.02
    assert np.median(np.abs(h100.loo_ttft)) < np.median(np.abs(h100.before_ttft)) / 2
    # one H200 point: leave-one-out has nothing to fit on, so its error is the shipped curves' own
    h200 = fits[("H200-SXM", "Llama-3.1-8B", 1)]
    assert np.allclose(h200.loo_ttft, h200.before_ttft) and h200.band == ()
    assert h100.band and all(t >= uc.NOISE_FLOOR["ttft"] for _, t, _ in h100.band)
    # the model's entry over all layouts corrects TPOT only, and has no band
    other = fits[("H100-SXM", "Llama-3.1-8B", 0)]
    assert other.ttft_factor == 1.0 and other.tpot_factor == h100.tpot_factor and other.band == ()


def test_written_file_round_trips_and_is_byte_identical(tmp_path):
    args = [*ALL, "--gpu", "H100-SXM", "--out"]
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    r1, r2 = invoke("calibrate-perf", *args, a), invoke("calibrate-perf", *args, b)
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output
    assert a.read_bytes() == b.read_bytes()
    doc = yaml.safe_load(a.read_text())
    assert doc["schema_version"] == 1 and doc["kind"] == "perf-calibration"
    corrections, sha = uc.load_calibration(a)
    assert len(corrections) == len(doc["corrections"]) == 4 and len(sha) == 64
    s = uc.with_calibration(PerfSettings(), a)
    assert settings_from_doc(settings_to_doc(s)) == s
    assert "TTFT error" in r1.stdout and "->" in r1.stdout


def test_bad_calibration_files(tmp_path):
    good = tmp_path / "c.yaml"
    assert invoke("calibrate-perf", *ALL, "--gpu", "H100-SXM", "--out", good).exit_code == 0
    doc = yaml.safe_load(good.read_text())
    for edit, needle in (
        (lambda d: d.update(kind="plan"), "not a perf calibration file"),
        (lambda d: d.update(schema_version=9), "schema_version"),
        (lambda d: d["corrections"][0].update(ttft_factor=0), "ttft_factor"),
        (lambda d: d["corrections"][0].update(engine="tgi"), "engine"),
        (lambda d: d["corrections"][0].update(tp=3.5), "tp must be a whole number"),
        (lambda d: d["corrections"][0].update(weight_dtype="*"), "weight_dtype"),
        (lambda d: d["corrections"].append(json.loads(json.dumps(d["corrections"][0]))), "corrected twice"),
    ):
        bad = json.loads(json.dumps(doc))
        edit(bad)
        f = tmp_path / "bad.yaml"
        f.write_text(yaml.safe_dump(bad))
        with pytest.raises(InputError, match=needle):
            uc.load_calibration(f)
    res = invoke("estimate", "--model", "Llama-3.1-8B", "--gpu", "H100", "--perf-calibration", tmp_path / "none.yaml")
    assert res.exit_code in (1, 2) and "Traceback" not in res.output


def test_estimate_applies_the_correction(tmp_path):
    cal = tmp_path / "c.yaml"
    assert invoke("calibrate-perf", *ALL, "--gpu", "H100-SXM", "--out", cal).exit_code == 0
    base = ["estimate", "--model", "Llama-3.1-8B", "--gpu", "H100", "--concurrency", "16", "--isl", "1000",
            "--osl", "200", "--json"]  # fmt: skip
    plain = json.loads(invoke(*base).stdout)
    fixed = json.loads(invoke(*base, "--perf-calibration", cal).stdout)
    c = uc.load_calibration(cal)[0]
    factor = next(x for x in c if x.gpu == "H100-SXM" and x.model == "Llama-3.1-8B" and x.tp == 1)
    assert fixed["ttft_s"] == pytest.approx(plain["ttft_s"] * factor.ttft_factor)
    assert fixed["tpot_s"] == pytest.approx(plain["tpot_s"] * factor.tpot_factor)
    single = json.loads(invoke("estimate", "--model", "Llama-3.1-8B", "--gpu", "H100", "--json",
                               "--perf-calibration", cal).stdout)  # fmt: skip
    raw = json.loads(invoke("estimate", "--model", "Llama-3.1-8B", "--gpu", "H100", "--json").stdout)
    assert single["prefill_latency_s"] == pytest.approx(raw["prefill_latency_s"] * factor.ttft_factor)
    # another TP: the TPOT factor of the model's all-layouts entry, TTFT as shipped
    tp2 = [*base[:5], "--tp", "2", *base[5:]]
    plain2 = json.loads(invoke(*tp2).stdout)
    fixed2 = json.loads(invoke(*tp2, "--perf-calibration", cal).stdout)
    assert fixed2["ttft_s"] == pytest.approx(plain2["ttft_s"])
    assert fixed2["tpot_s"] == pytest.approx(plain2["tpot_s"] * factor.tpot_factor)


def test_plan_provenance_changes_with_the_file(tmp_path):
    a = tmp_path / "a.yaml"
    assert invoke("calibrate-perf", *ALL, "--gpu", "H100-SXM", "--out", a).exit_code == 0
    b = tmp_path / "b.yaml"
    shutil.copy(FIX / "points_measured.csv", tmp_path / "p.csv")
    assert invoke("calibrate-perf", tmp_path / "p.csv", "--out", b).exit_code == 0
    base = ["plan", "--model", "Llama-3.1-8B", "--synthetic", "balanced", "--goodput", "4", "--gpus", "H100",
            "--no-analysis", "--json"]  # fmt: skip
    docs = [json.loads(invoke(*base, *extra).stdout) for extra in ((), ("--perf-calibration", a),
                                                                  ("--perf-calibration", b))]  # fmt: skip
    shas = [d["provenance"].get("perf_calibration_sha256") for d in docs]
    assert shas[0] is None and shas[1] and shas[2] and shas[1] != shas[2]
    assert "corrections" not in docs[0]["scenario"]["perf_settings"]
    assert docs[1]["scenario"]["perf_settings"]["calibration_sha256"] == shas[1]


def test_scenario_field_resolves_against_the_scenario_folder(tmp_path):
    cal = tmp_path / "cal.yaml"
    assert invoke("calibrate-perf", *ALL, "--gpu", "H100-SXM", "--out", cal).exit_code == 0
    sc = tmp_path / "s.yaml"
    sc.write_text("model: Llama-3.1-8B\nworkload: {synthetic: {class: balanced, rate_per_s: 4}}\ngpus: [H100]\n"
                  "perf: {calibration: cal.yaml}\n")  # fmt: skip
    doc = json.loads(invoke("plan", sc, "--no-analysis", "--json").stdout)
    assert doc["provenance"]["perf_calibration_sha256"] == uc.load_calibration(cal)[1]


def test_error_band_narrows_to_the_calibrated_residuals():
    shipped = error_band("vllm", ["H200-SXM"], "p80")
    assert shipped is not None, "catalogs/perf/error_bands.yaml ships a vLLM H200 band"
    mine = (PerfCorrection("vllm", "H200-SXM", "Llama-3.1-8B", 1.1, 1.05, (("p80", 0.12, 0.03),), 1, "bf16"),)
    layouts = {"H200-SXM": {(1, "bf16")}}
    narrowed = error_band("vllm", ["H200-SXM"], "p80", mine, "Llama-3.1-8B", layouts)
    assert narrowed is not None
    assert narrowed.ttft == min(shipped.ttft, 0.12) and narrowed.tpot == min(shipped.tpot, 0.03)
    assert "your calibration" in narrowed.scope
    # another engine's or model's correction leaves the band alone
    sglang = error_band("sglang", ["H200-SXM"], "p80")
    assert error_band("sglang", ["H200-SXM"], "p80", mine, "Llama-3.1-8B", layouts) == sglang
    assert error_band("vllm", ["H200-SXM"], "p80", mine, "Qwen3-8B", layouts) == shipped
    # a layout of the plan without a band of its own keeps the shipped band
    both = {"H200-SXM": {(1, "bf16"), (2, "bf16")}}
    assert error_band("vllm", ["H200-SXM"], "p80", mine, "Llama-3.1-8B", both) == shipped


def test_layout_entry_first_then_the_models_tpot_only_never_another_model():
    entries = (PerfCorrection("vllm", "H100-SXM", "Llama-3.1-8B", 2.0, 1.5),
               PerfCorrection("vllm", "H100-SXM", "Llama-3.1-8B", 1.2, 1.1, (), 1, "bf16"))  # fmt: skip
    s = PerfSettings(corrections=entries)
    own = s.correction("H100-SXM", "Llama-3.1-8B", 1, "bf16")
    assert own is not None and (own.ttft_factor, own.tpot_factor) == (1.2, 1.1)
    other = s.correction("H100-SXM", "Llama-3.1-8B", 2, "bf16")
    assert other is not None and (other.ttft_factor, other.tpot_factor) == (1.0, 1.5)
    assert s.correction("H100-SXM", "Llama-3-8B", 1, "bf16") is None
    assert s.correction("H200-SXM", "Llama-3.1-8B", 1, "bf16") is None


def test_simulate_replays_with_the_calibration(tmp_path):
    from tests.conftest import FIXTURES

    cal = tmp_path / "cal.yaml"
    cal.write_text(
        yaml.safe_dump(
            {
                "schema_version": 1,
                "kind": "perf-calibration",
                "corrections": [
                    {
                        "engine": "vllm",
                        "gpu": "A100-80GB-SXM",
                        "model": "Llama-3-70B",
                        "ttft_factor": 2.0,
                        "tpot_factor": 1.5,
                    }
                ],
            }  # fmt: skip
        )
    )
    args = ("simulate", FIXTURES / "plan_example_a.json", "--concurrency", "4", "--isl", "256", "--osl", "16",
            "--requests", "8", "--json")  # fmt: skip
    plain, slow = invoke(*args), invoke(*args, "--perf-calibration", cal)
    assert plain.exit_code == 0 and slow.exit_code == 0, plain.output + slow.output
    a, b = json.loads(plain.stdout)["tpot_s"]["mean"], json.loads(slow.stdout)["tpot_s"]["mean"]
    assert b > 1.3 * a
    bad = invoke(*args, "--perf-calibration", FIX / "points_measured.csv")
    assert bad.exit_code in (1, 2) and "perf calibration file" in bad.output and "Traceback" not in bad.output


def test_bad_numbers_in_a_benchmark_file_are_one_line_errors(tmp_path):
    doc = json.loads((FIX / "vllm_bench_c16.json").read_text())
    doc["max_concurrency"] = "lots"
    f = tmp_path / "run.json"
    f.write_text(json.dumps(doc))
    res = invoke("calibrate-perf", f, "--out", tmp_path / "c.yaml")
    assert res.exit_code in (1, 2) and "concurrency is not a number" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "c.yaml").exists()  # nothing partial written
    empty = tmp_path / "e.csv"
    empty.write_text("")
    res = invoke("calibrate-perf", empty)
    assert res.exit_code in (1, 2) and "Traceback" not in res.output


@pytest.mark.slow
def test_plan_verdict_uses_the_calibrated_band(tmp_path):
    cal = tmp_path / "cal.yaml"
    assert invoke("calibrate-perf", *ALL, "--gpu", "H100-SXM", "--out", cal).exit_code == 0
    base = ["plan", "--model", "Llama-3.1-8B", "--synthetic", "balanced", "--goodput", "4", "--gpus", "H100",
            "--no-analysis", "--verify", "--json"]  # fmt: skip
    shipped = json.loads(invoke(*base).stdout)["verification"]["model_error"]
    mine = json.loads(invoke(*base, "--perf-calibration", cal).stdout)["verification"]["model_error"]
    own = next(c for c in uc.load_calibration(cal)[0] if c.gpu == "H100-SXM" and c.tp == 1)
    p80 = next((t, p) for conf, t, p in own.band if conf == "p80")
    assert (mine["band_ttft"], mine["band_tpot"]) == (
        min(shipped["band_ttft"], p80[0]),
        min(shipped["band_tpot"], p80[1]),
    )
    assert "your calibration of Llama-3.1-8B on H100-SXM" in mine["band_scope"]
    assert "your calibration" not in shipped["band_scope"]


def test_plan_says_which_gpus_the_calibration_corrects(tmp_path):
    cal = tmp_path / "cal.yaml"
    assert invoke("calibrate-perf", FIX / "points_measured.csv", "--out", cal).exit_code == 0
    base = ["plan", "--synthetic", "balanced", "--goodput", "4", "--gpus", "H100", "--no-analysis", "--json",
            "--perf-calibration", cal]  # fmt: skip
    hit = json.loads(invoke(*base, "--model", "Llama-3.1-8B").stdout)["warnings"]
    assert any("corrected by your benchmarks on H100-SXM (TP1: TTFT and TPOT" in w for w in hit), hit
    miss = json.loads(invoke(*base, "--model", "Llama-3-8B").stdout)["warnings"]
    assert any("corrects no candidate GPU" in w for w in miss)
