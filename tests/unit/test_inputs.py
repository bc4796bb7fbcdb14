"""Bad input gets a clear, typed error (regression tests for cases found by trying to break the CLI)."""

import json
import os
import stat

import pytest

from hetplan.catalog import find_model
from hetplan.errors import CatalogError, InputError, OutputExistsError
from hetplan.io import to_json, write_atomic
from hetplan.scenario import load_scenario
from hetplan.units import parse_duration_s, parse_percentile, parse_share
from hetplan.workload import load_workload


@pytest.mark.parametrize("text", ["800", "abc", "0s", "-1ms", "1e-9s", True])
def test_bad_durations(text):
    with pytest.raises(InputError):
        parse_duration_s(text, "ttft")


def test_durations():
    assert parse_duration_s("80ms", "tpot") == pytest.approx(0.08)
    assert parse_duration_s(2, "ttft") == 2.0  # a Python number is seconds (scenario files refuse bare numbers)


@pytest.mark.parametrize("text,expected", [("90%", 0.9), ("p99", 0.99), (0.95, 0.95), ("99.9%", 0.999), (0.5, 0.5)])
def test_percentiles(text, expected):
    assert parse_percentile(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["0", "100", "p1", "1e-9", "abc", "1", True, "90", 99.9, "p" + "9" * 400])
def test_bad_percentiles(text):
    with pytest.raises(InputError):
        parse_percentile(text)


@pytest.mark.parametrize("text", ["90%", "90 %", "p90", "P90", 0.9, "0.9", ".9"])
def test_one_percent_syntax_everywhere(text):
    """--percentile, simulate --target and calibrate --quantile read 90 %% written any of the accepted ways."""
    from hetplan.cli.simulate import parse_share as cli_share

    assert parse_percentile(text) == pytest.approx(0.9)
    assert parse_share(text, "--target") == pytest.approx(0.9)
    assert cli_share(str(text), "--target") == pytest.approx(0.9)
    assert cli_share(str(text), "--quantile", upper_open=True) == pytest.approx(0.9)


def test_share_edges():
    from hetplan.cli.simulate import parse_share as cli_share

    assert cli_share("1", "--target") == 1.0  # 1 is a fraction: 100 %
    assert cli_share("1%", "--target") == pytest.approx(0.01)
    assert cli_share("1.5%", "--quantile", upper_open=True) == pytest.approx(0.015)
    with pytest.raises(InputError, match="outside"):
        cli_share("1", "--quantile", upper_open=True)
    with pytest.raises(InputError, match="outside"):
        cli_share("150%", "--target")
    with pytest.raises(InputError) as err:
        cli_share("ninety", "--target")
    assert "write e.g. --target 90%, p90 or 0.9" in err.value.render()


@pytest.mark.parametrize("text", ["1.5", "90", "150", "99.9", "1.0000001"])
def test_no_share_reads_two_ways(text):
    """``--quantile 1.5`` meant 1.5 %% while ``1`` meant 100 %%: a bare number above 1 is now refused everywhere
    (flags and scenario fields), with the fix naming both spellings."""
    from hetplan.cli.simulate import parse_share as cli_share

    for parse in (lambda t: cli_share(t, "--quantile", upper_open=True), lambda t: cli_share(t, "--target"),
                  parse_percentile, lambda t: parse_share(t, "--hysteresis", 0.0, 1.0, False, True, "10")):  # fmt: skip
        with pytest.raises(InputError) as err:
            parse(text)
        assert "bare number above 1" in err.value.what and f"{float(text):g}%" in err.value.fix


def test_scenario_percentile_and_hysteresis_follow_the_percent_rule(tmp_path):
    base = "model: Llama-3-8B\nworkload: {synthetic: {class: balanced, rate_per_s: 1}}\n"
    from hetplan.units import parse_percentile as pp

    for ok in ("p90", "90%", 0.9):
        assert pp(load_scenario(write(tmp_path, "s.yaml", base + f"slo: {{percentile: {ok!r}}}\n")).slo.percentile,
                  "slo.percentile") == pytest.approx(0.9)  # fmt: skip
    with pytest.raises(InputError, match="bare number above 1"):
        pp(load_scenario(write(tmp_path, "s.yaml", base + "slo: {percentile: 90}\n")).slo.percentile)
    auto = "autoscale: {load_curve: c.csv, hysteresis: '20%'}\n"
    assert load_scenario(write(tmp_path, "a.yaml", base + auto)).autoscale.hysteresis == pytest.approx(0.2)


SCENARIO = "model: Llama-3-8B\nworkload: {{synthetic: {{class: balanced, rate_per_s: 2}}}}\n{extra}\n"


@pytest.mark.parametrize(
    "extra,needle",
    [
        ("slo: {ttft: 2, tpot: 100ms}", "slo.ttft: 2 has no unit"),
        ("slo: {ttft: 2s, tpot: 50}", "tpot: 50s or 50ms, or tpot_s: 50 for seconds"),
        ("slo: {tpot: 0.05}", "tpot_s: 0.05 for seconds"),
        ("autoscale: {cooldown: 600}", "cooldown_s: 600"),
        ("autoscale: {startup_lag_by_gpu: {H100: 5}}", "startup_lag_by_gpu.H100: 5 has no unit"),
        ("slo: {ttft: 2s, ttft_s: 2}", "ttft_s and ttft both given"),
        ("slo: {ttft_s: 2s}", "ttft_s is a number of seconds"),
    ],
)
def test_scenario_durations_need_a_unit(tmp_path, extra, needle):
    path = write(tmp_path, "s.yaml", SCENARIO.format(extra=extra))
    with pytest.raises(InputError) as err:
        load_scenario(path)
    assert needle in " ".join(str(err.value.render()).split())


def test_unit_named_durations_are_seconds(tmp_path):
    path = write(
        tmp_path, "s.yaml", SCENARIO.format(extra="slo: {ttft_s: 1.5, tpot_s: 0.08}\nautoscale: {cooldown_s: 600}")
    )
    sc = load_scenario(path)
    assert parse_duration_s(sc.slo.ttft, "ttft") == pytest.approx(1.5)
    assert parse_duration_s(sc.slo.tpot, "tpot") == pytest.approx(0.08)
    assert sc.autoscale is not None and parse_duration_s(sc.autoscale.cooldown, "cooldown", 0, 1e6) == 600.0


def write(tmp_path, name, text, mode="w"):
    path = tmp_path / name
    with open(path, mode) as fh:
        fh.write(text)
    return path


@pytest.mark.parametrize(
    "body,needle",
    [
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,abc,4\n", "ContextTokens in row 1"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,,4\n", "ContextTokens in row 1"),
        (
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,4\n2023-11-16 18:15:47,12,-1\n",
            "GeneratedTokens in row 2",
        ),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n0,10,4\n1,12,5\n", "numbers, not date-times"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,10,4\n", "not a date-time"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10.5,4\n", "whole number"),
    ],
)
def test_bad_azure_rows_name_row_and_column(tmp_path, body, needle):
    with pytest.raises(InputError) as info:
        load_workload(write(tmp_path, "t.csv", body))
    assert needle in info.value.render()
    assert info.value.exit_code == 2


def test_mooncake_bad_values(tmp_path):
    for line in (
        '{"timestamp": 0, "input_length": 1e999, "output_length": 2}',
        '{"timestamp": 0, "input_length": true, "output_length": 2}',
    ):
        with pytest.raises(InputError):
            load_workload(write(tmp_path, "m.jsonl", line + "\n"))
    with pytest.raises(InputError, match="UTF-8"):
        load_workload(write(tmp_path, "b.jsonl", b"\xff\xfe\x00garbage", "wb"))


def test_scenario_yaml_problems(tmp_path):
    base = "model: Llama-3-8B\nworkload: {synthetic: {class: balanced, rate_per_s: 1}}\n"
    with pytest.raises(CatalogError, match="line 3"):
        load_scenario(write(tmp_path, "d.yaml", base + "model: Llama-3-70B\n"))
    with pytest.raises(CatalogError) as info:
        load_scenario(write(tmp_path, "b.yaml", "model: X\nworkload: {path: a.csv, synthetic: {rate_per_s: 1}}\n"))
    assert "exactly one" in info.value.why
    for extra in ("base_dir: /tmp\n", "goodput_req_per_s: .inf\n", "headroom: -1\n", "gpus: []\n", "tp: [16]\n"):
        with pytest.raises(CatalogError):
            load_scenario(write(tmp_path, "x.yaml", base + extra))
    with pytest.raises(InputError, match="UTF-8"):
        load_scenario(write(tmp_path, "bin.yaml", b"\xff\xfe\x00", "wb"))
    assert load_scenario(write(tmp_path, "ok.yaml", base)).model == "Llama-3-8B"


@pytest.mark.parametrize(
    "cfg",
    [
        {
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 0,
            "intermediate_size": 1,
            "vocab_size": 10,
        },
        {
            "hidden_size": "big",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "intermediate_size": 1,
            "vocab_size": 10,
        },
        [1, 2, 3],
    ],
)
def test_bad_hf_configs(tmp_path, cfg):
    with pytest.raises(InputError):
        find_model(str(write(tmp_path, "config.json", json.dumps(cfg))))


def test_write_atomic_rules(tmp_path):
    target = tmp_path / "plan.yaml"
    write_atomic(target, "a")
    os.chmod(target, 0o640)
    with pytest.raises(OutputExistsError):
        write_atomic(target, "b")
    write_atomic(target, "b", force=True)
    assert target.read_text() == "b" and stat.S_IMODE(target.stat().st_mode) == 0o640
    (tmp_path / "adir").mkdir()
    for bad in (tmp_path / "adir", str(tmp_path / "new") + "/", "-", ""):
        with pytest.raises(InputError):
            write_atomic(bad, "x", force=True)
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(InputError):
        write_atomic(link, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "dangling", "plan.yaml"]


def test_json_refuses_nan():
    with pytest.raises(ValueError):
        to_json({"x": float("inf")})


def test_every_scenario_file_in_the_repository_gives_its_durations_with_units():
    """Scenario files in examples/, tests/ and benchmarks/ load under the unit rule (bare numbers refused)."""
    import yaml

    from tests.conftest import ROOT

    found = 0
    for path in sorted(
        [*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/**/*.yaml"), *ROOT.glob("benchmarks/**/*.yaml")]
    ):
        docs = list(yaml.safe_load_all(path.read_text()))  # golden manifests hold several documents
        if len(docs) == 1 and isinstance(docs[0], dict) and docs[0].get("kind") == "scenario":
            load_scenario(path)
            found += 1
    assert found >= 5


# --- one numeric edge and one structural check for every reader (issue 35) ---

SCENARIO_BASE = "model: Llama-3-8B\nworkload: {synthetic: {class: balanced, rate_per_s: 1}}\n"


@pytest.mark.parametrize("key", ["? [a, b]\n: 1\n", "? {a: 1}\n: 1\n", "goodput_req_per_s: {? [1]: 2}\n"])
def test_yaml_keys_that_are_lists_or_maps_are_refused(tmp_path, key):
    """A list or map as a key used to end in ``TypeError: unhashable type`` in the duplicate-key check."""
    with pytest.raises(CatalogError) as info:
        load_scenario(write(tmp_path, "k.yaml", SCENARIO_BASE + key))
    assert "map key is a list" in info.value.why or "map key is a dict" in info.value.why


def test_deep_json_is_refused_before_parsing(tmp_path):
    """100,000 levels of JSON used to raise RecursionError inside json.loads (the config.json path had no catch)."""
    deep = '{"a": ' * 100_000 + "1" + "}" * 100_000
    cfg = write(tmp_path, "config.json", deep)
    with pytest.raises(InputError, match="more than 64 levels"):
        find_model(str(cfg))
    with pytest.raises(CatalogError, match="more than 64 levels"):
        load_scenario(write(tmp_path, "s.json", "[" * 100_000 + "]" * 100_000))
    from hetplan.input_checks import json_depth

    assert json_depth('{"a": "[[[[", "b": [[1]], "c": "\\"{"}') == 3  # brackets inside strings do not count


@pytest.mark.parametrize(
    "value",
    ["1" + "0" * 5000, "1.0e+308", ".inf", "-.nan", "10000000000000000"],
)
def test_numbers_at_the_edges_in_yaml_files(tmp_path, value):
    """Integers with thousands of digits (ValueError in PyYAML's int()) and 1e308 (finite, then inf in arithmetic)
    are refused for every field, before the schema sees them."""
    with pytest.raises(CatalogError):
        load_scenario(write(tmp_path, "n.yaml", SCENARIO_BASE + f"goodput_req_per_s: {value}\n"))


@pytest.mark.parametrize("value", ["1" + "0" * 5000, "1" + "0" * 400, "1e308", "Infinity", "NaN"])
def test_numbers_at_the_edges_in_config_json(tmp_path, value):
    cfg = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "intermediate_size": 14336,
           "vocab_size": 128256}  # fmt: skip
    text = json.dumps(cfg).replace("14336", value)
    with pytest.raises(InputError):
        find_model(str(write(tmp_path, "config.json", text)))


def test_check_number_rule():
    from hetplan.input_checks import MAX_NUMBER, check_number, parse_number

    assert check_number(MAX_NUMBER, "x") == MAX_NUMBER and check_number(-3, "x") == -3
    for bad in (float("inf"), float("nan"), 10**5000, -(10**16), 1e308, True, "1"):
        with pytest.raises(InputError):
            check_number(bad, "x")
    assert parse_number(" 12.5 ", "x") == 12.5
    for text in ("9" * 400, "1e308", "inf", "nan", "٣", "1,000", ""):
        with pytest.raises(InputError):
            parse_number(text, "x")


def test_a_config_with_more_dense_layers_than_layers_is_refused(tmp_path):
    """``first_k_dense_replace`` above ``num_hidden_layers`` gave negative weight memory and exit 0."""
    cfg = {
        "hidden_size": 2048,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "intermediate_size": 5632,  # fmt: skip
        "vocab_size": 32000,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 40,
    }
    with pytest.raises(InputError) as info:
        find_model(str(write(tmp_path, "config.json", json.dumps(cfg))))
    assert "first_k_dense_replace" in info.value.why
    cfg["first_k_dense_replace"] = 4
    assert find_model(str(write(tmp_path, "config.json", json.dumps(cfg)))).first_k_dense_replace == 4


@pytest.mark.parametrize(
    ("field", "value"),
    [("bf16_dense_tflops", 1e14), ("hbm_gib", 1e12), ("hbm_gb_per_s", 1e300), ("tdp_w", -5), ("scale_up_gpus", 10**9)],
)
def test_gpu_figures_have_documented_bounds(small_catalog, tmp_path, monkeypatch, field, value):
    """A user's catalog folder (HETPLAN_CATALOG_DIR) with a GPU figure far beyond any device is refused."""
    import shutil

    import yaml

    from hetplan.catalog.context import Catalog

    folder = tmp_path / "catalog"
    shutil.copytree(small_catalog, folder)
    doc = yaml.safe_load((folder / "gpus.yaml").read_text())
    doc["gpus"][0][field] = value
    (folder / "gpus.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(CatalogError):
        Catalog.from_folder(folder).find_gpu("H100")


@pytest.mark.parametrize("offer", [{"usd_per_instance_hour": 1e12}, {"count": 10**12}, {"gpus_per_instance": 10**9}])
def test_price_file_figures_have_documented_bounds(small, tmp_path, offer):
    from hetplan.catalog.loader import load_user_prices
    from hetplan.catalog.offers import user_offers

    row = {"provider": "owned", "gpu": "H100", "gpus_per_instance": 8, "count": 2, "usd_per_gpu_hour": 1.0, **offer}
    doc = {"schema_version": 1, "kind": "prices", "source": "t", "as_of": "2026-01-01", "offers": [row]}
    path = write(tmp_path, "prices.json", json.dumps(doc))
    with pytest.raises(InputError, match="must be in"):
        user_offers(load_user_prices(path), str(path), small)


POINTS_HEADER = "model,gpu,concurrency,isl,osl"


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "folder"])
def test_points_refuse_special_files(tmp_path, special):
    """``estimate --points`` on a FIFO blocked forever and on /dev/zero read until memory ran out."""
    from hetplan.perf.points_table import read_points

    path = tmp_path / special
    if special == "fifo":
        os.mkfifo(path)
    elif special == "folder":
        path.mkdir()
    else:
        path = special
    with pytest.raises(InputError, match="not a regular file|is a folder"):
        read_points(path)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (POINTS_HEADER + ",isl\nLlama-3-8B,H100,8,128,128,99999\n", "more than once"),
        (POINTS_HEADER + "\nLlama-3-8B,H100,8,128,128,5\n", "6 cells for 5 columns"),
        (POINTS_HEADER + "\nLlama-3-8B,H100,8,128\n", "4 cells for 5 columns"),
    ],
)
def test_points_duplicate_columns_and_extra_cells_are_errors(tmp_path, text, needle):
    """A duplicated column silently took the last value and extra cells were dropped."""
    from hetplan.perf.points_table import read_points

    with pytest.raises(InputError, match=needle):
        read_points(write(tmp_path, "p.csv", text))


def test_points_rows_get_the_checks_of_estimate(small):
    """A points row must be refused where ``hetplan estimate`` refuses: bf16 on a GPU without bf16 tensor cores,
    and numbers beyond the numeric rule (1e300, thousands of digits) are row errors, not estimates."""
    from hetplan.catalog.schemas import GpuSpec
    from hetplan.perf.estimate import check_gpu_runs

    volta = GpuSpec(name="V", arch="Volta", fp16_dense_tflops=100, hbm_gib=32, hbm_gb_per_s=900,
                    interconnect_gb_per_s=300, network_gbit_per_s=100)  # fmt: skip
    with pytest.raises(InputError, match="cannot run bf16"):
        check_gpu_runs(volta, "bf16")
    check_gpu_runs(volta, "fp16")
    from hetplan.perf.points import estimate_points

    row = {"model": "Llama-3-8B", "gpu": "H100", "concurrency": "8", "isl": "128", "osl": "128"}
    assert "error" not in estimate_points([row], small)[0]
    for column, value in (("isl", "1e300"), ("concurrency", "9" * 5000), ("osl", "inf"), ("isl", "20000000")):
        out = estimate_points([{**row, column: value}], small)[0]
        assert column in out["error"] and "whole number in [1, 10,000,000]" in out["error"], out


def test_points_bf16_on_volta_is_a_row_error(tmp_path):
    """The CLI: ``estimate`` refuses bf16 on V100 and so does a ``--points`` row with the same values."""
    from typer.testing import CliRunner

    from hetplan.cli.main import app

    runner = CliRunner()
    single = runner.invoke(app, ["estimate", "--model", "Llama-3-8B", "--gpu", "V100", "--concurrency", "8",
                                 "--isl", "128", "--osl", "128"])  # fmt: skip
    assert single.exit_code == 2 and "cannot run bf16" in single.output
    table = write(tmp_path, "p.csv", POINTS_HEADER + ",weight_dtype\nLlama-3-8B,V100,8,128,128,bf16\n")
    res = runner.invoke(app, ["estimate", "--points", str(table), "--json"])
    assert "cannot run bf16" in json.loads(res.stdout)[0]["error"]


AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("TIMESTAMP,ContextTokens,GeneratedTokens,ContextTokens\n2023-01-01 00:00:00,100,10,5\n", "more than once"),
        (AZURE_HEADER + "2023-01-01 00:00:00,100,10,5\n2023-01-01 00:00:01,100,10\n", "more cells than its header"),
        (AZURE_HEADER + "2023-01-01 00:00:00,100,10\n2023-01-01 00:00:01,100,10,5\n", "more cells than its header"),
        (AZURE_HEADER + "1700-01-01 00:00:00,100,10\n2200-01-01 00:00:00,100,10\n", "more than the century"),
        (AZURE_HEADER + "1900-01-01 00:00:00,100,10\n2100-01-01 00:00:00,100,10\n", "more than the century"),
        ("num_prefill_tokens,num_decode_tokens,num_decode_tokens\n5,6,7\n", "more than once"),
    ],
)
def test_csv_traces_refuse_duplicate_columns_extra_cells_and_centuries(tmp_path, text, needle):
    """A duplicated column silently took the last value, an extra cell became pandas' index (or was dropped), and
    timestamps 500 years apart overflowed int64 nanoseconds into a garbage span (exit 0)."""
    with pytest.raises(InputError, match=needle):
        load_workload(write(tmp_path, "t.csv", text))


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ('{"timestamp": 0, "input_length": ' + "9" * 400 + ', "output_length": 5}', "digits"),
        ('{"timestamp": 1e300, "input_length": 10, "output_length": 5}', "beyond"),
        ('{"timestamp": 9e12, "input_length": 10, "output_length": 5}', "more than the century"),
        ('{"timestamp": 0, "input_length": 10, "input_length": 11, "output_length": 5}', "duplicate key"),
        ('{"timestamp": 0, "input_length": 10, "output_length": 5, "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
         "levels deep"),
    ],
)  # fmt: skip
def test_mooncake_lines_go_through_the_shared_json_rule(tmp_path, line, needle):
    """A 400-digit length raised OverflowError in pandas; 1e300 ms was accepted; a deep line raised RecursionError."""
    text = '{"timestamp": 0, "input_length": 10, "output_length": 5}\n' + line + "\n"
    with pytest.raises(InputError, match=needle):
        load_workload(write(tmp_path, "t.jsonl", text))


def test_stream_of_azure_files_a_century_apart_is_refused(tmp_path):
    from hetplan.workload import read_stream

    a = write(tmp_path, "a.csv", AZURE_HEADER + "2023-01-01 00:00:00,100,10\n")
    b = write(tmp_path, "b.csv", AZURE_HEADER + "1700-01-01 00:00:00,100,10\n")
    with pytest.raises(InputError, match="more than the century"):
        read_stream([a, b])


@pytest.mark.parametrize("row", ["1e300,1,0.5", "0,1,1e300", "4e9,1,0.5"])
def test_load_curves_keep_the_numeric_rule(tmp_path, row):
    from hetplan.autoscale.curves import read_servegen

    with pytest.raises(InputError):
        read_servegen(write(tmp_path, "c.csv", f"0,1,0.5\n{row}\n"))


@pytest.mark.parametrize(
    "args",
    [
        ["simulate", "tests/fixtures/plan_example_a.json", "--trace", "tests/fixtures/azure_conv_200.csv",
         "--rate-scale", "1e308"],
        ["estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--batch", "9" * 30],
        ["estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--prompt-tokens", "9" * 400],
        ["profile", "fit", "--model", "Llama-3-8B", "--synthetic", "balanced", "--gpus", "H100", "--rate", "1e300",
         "--out", "fit.json"],
    ],
)  # fmt: skip
def test_every_numeric_flag_goes_through_the_numeric_rule(args, tmp_path, monkeypatch):
    """``--rate-scale 1e308`` simulated (exit 0); a 30-digit --batch reached the memory arithmetic."""
    from typer.testing import CliRunner

    from hetplan.cli.main import app
    from tests.conftest import ROOT

    monkeypatch.chdir(ROOT)
    args = [str(tmp_path / a) if a == "fit.json" else a for a in args]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert res.exit_code == 2 and "hetplan accepts for any number" in res.output, res.output[-600:]
    assert not (tmp_path / "fit.json").exists()


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_every_document_reader_refuses_special_files(tmp_path, special):
    """Scenario, plan, baseline, profile, price file, config.json and trace readers refuse a FIFO or a device
    before reading (a FIFO blocks forever, /dev/zero never ends)."""
    from hetplan.catalog.loader import load_user_prices, model_from_hf_config, read_yaml_mapping
    from hetplan.catalog.profile import load_profile
    from hetplan.perf.points_table import read_points
    from hetplan.plan.doc import load_plan

    path = tmp_path / "x.json"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path = special
    from pathlib import Path

    for reader in (load_scenario, load_plan, load_user_prices, model_from_hf_config, load_profile, load_workload,
                   read_points, lambda p: read_yaml_mapping(p, "baseline")):  # fmt: skip
        with pytest.raises(InputError, match="not a regular file"):
            reader(Path(path))
