import numpy as np
import pytest

from hetplan.errors import InputError
from hetplan.workload import SYNTHETIC_CLASSES, load_workload, synthetic_workload


def test_azure_reader(fixtures):
    wl = load_workload(fixtures / "azure_conv_200.csv")
    assert wl.n_requests == 200
    assert wl.prompt_tokens[0] == 374 and wl.output_tokens[0] == 44
    assert wl.arrival_rate_per_s == pytest.approx(199 / wl.duration_s)
    assert "Splitwise" in wl.attribution


def test_mooncake_reader(fixtures):
    wl = load_workload(fixtures / "mooncake_300.jsonl")
    assert wl.n_requests == 300
    assert wl.prompt_tokens[0] == 40160
    assert wl.duration_s == pytest.approx(wl.arrival_rate_per_s and 299 / wl.arrival_rate_per_s)


def test_length_csv_needs_rate(fixtures):
    wl = load_workload(fixtures / "sharegpt_stats_500.csv")
    assert wl.arrival_rate_per_s is None and wl.n_requests == 500
    assert load_workload(fixtures / "sharegpt_stats_500.csv", rate_per_s=3.0).arrival_rate_per_s == 3.0


@pytest.mark.parametrize("kind", list(SYNTHETIC_CLASSES))
def test_synthetic_classes_deterministic(kind):
    a = synthetic_workload(kind, 2.0, 500, seed=1)
    b = synthetic_workload(kind, 2.0, 500, seed=1)
    assert np.array_equal(a.prompt_tokens, b.prompt_tokens) and a.arrival_rate_per_s == 2.0
    p_med, o_med = SYNTHETIC_CLASSES[kind]
    assert np.median(a.prompt_tokens) == pytest.approx(p_med, rel=0.15)
    assert np.median(a.output_tokens) == pytest.approx(o_med, rel=0.15)


def test_cauchy_classes_ordered():
    long_in = synthetic_workload("long-input-short-output", 1.0, 500)
    long_out = synthetic_workload("short-input-long-output", 1.0, 500)
    assert long_in.prompt_tokens.mean() > 4 * long_out.prompt_tokens.mean()
    assert long_out.output_tokens.mean() > 4 * long_in.output_tokens.mean()


def test_bad_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_workload(tmp_path / "missing.csv")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"timestamp": 0}\n')
    with pytest.raises(InputError, match="bad.jsonl:1"):
        load_workload(bad)
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="no prompt/output length columns"):
        load_workload(odd)
    with pytest.raises(InputError, match="unknown synthetic"):
        synthetic_workload("nope")
