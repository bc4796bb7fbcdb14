import json

import numpy as np
import pytest
from typer.testing import CliRunner

from hetplan.autoscale.curves import LoadCurve, diurnal, load_curve, read_servegen
from hetplan.autoscale.schedule import ScheduleSettings, build_schedule
from hetplan.autoscale.schedule_summary import summary
from hetplan.cli.main import app
from hetplan.errors import InputError
from hetplan.solvers.cauchy import solve_allocation
from hetplan.solvers.cauchy_candidates import enumerate_candidates
from tests.helpers import gpu, request

X = gpu("X", tflops=1000, gb_per_s=2000)
Y = gpu("Y", tflops=150, gb_per_s=4000)
PRICES = {"X": 4.0, "Y": 2.0}


def curve(rates, cv=None, window_s=600.0):
    rates = np.asarray(rates, dtype=float)
    cvs = np.ones_like(rates) if cv is None else np.asarray(cv, dtype=float)
    return LoadCurve("t", "test", "", window_s, np.arange(rates.size) * window_s, rates, cvs)


def req(**kw):
    return request([X, Y], PRICES, ttft=5.0, tp=(1, 2), max_ratio=4, **kw)


def test_constant_curve_gives_the_static_plan():
    r = req()
    sched = build_schedule(r, curve([6.0] * 30))
    assert len(set(sched.requested_level.tolist())) == 1
    static = solve_allocation(r.__class__(**{**r.__dict__, "goodput_req_per_s": 6.0}), enumerate_candidates(r).combos)
    assert sched.cost_per_window()[0] == pytest.approx(static.total_usd_per_hour)
    s = summary(sched)
    assert s["schedule_usd"] == pytest.approx(s["static_peak_usd"]) and s["combo_changes"] == 0


def test_hysteresis_stops_flapping():
    rng = np.random.default_rng(0)
    noisy = np.clip(8.0 * (1 + 0.25 * rng.standard_normal(200)), 1.0, None)
    lag0 = {"default_startup_lag_s": 0.0}
    calm = summary(build_schedule(req(), curve(noisy), ScheduleSettings(hysteresis=0.5, cooldown_s=7200, **lag0)))
    jumpy = summary(build_schedule(req(), curve(noisy), ScheduleSettings(hysteresis=0.0, cooldown_s=0, **lag0)))
    assert jumpy["combo_changes"] >= 20
    assert calm["combo_changes"] * 4 <= jumpy["combo_changes"]


def test_zero_lag_never_short_and_never_dearer_than_peak():
    rates = diurnal(days=2, window_s=600, peak_req_per_s=20, trough_req_per_s=1).rate_req_per_s
    settings = ScheduleSettings(default_startup_lag_s=0.0, max_changes_per_window=10_000)
    sched = build_schedule(req(), curve(rates), settings)
    s = summary(sched)
    assert s["short_windows"] == 0
    assert np.all(sched.capacity(sched.available_level) >= sched.demand_req_per_s - 1e-9)
    assert s["schedule_usd"] <= s["static_peak_usd"] + 1e-6
    assert s["schedule_usd"] >= s["per_window_optimum_usd"] - 1e-6


def test_lag_requests_capacity_ahead():
    rates = [1.0] * 10 + [15.0] * 10
    sched = build_schedule(req(), curve(rates), ScheduleSettings(default_startup_lag_s=1200.0))
    assert sched.lag_windows == 2
    assert summary(sched)["short_windows"] == 0  # requested two windows before the step


def test_burstiness_raises_demand():
    plain = curve([5.0] * 4)
    bursty = curve([5.0] * 4, cv=[3.0] * 4)
    assert np.all(bursty.effective_rate() > plain.effective_rate())
    assert plain.effective_rate() == pytest.approx([5.0] * 4)


def test_same_input_same_schedule():
    rates = diurnal(days=1, window_s=900, peak_req_per_s=12, trough_req_per_s=2).rate_req_per_s
    a = build_schedule(req(), curve(rates, window_s=900))
    b = build_schedule(req(), curve(rates, window_s=900))
    assert np.array_equal(a.requested_level, b.requested_level) and summary(a) == summary(b)


def test_curve_readers(tmp_path, examples):
    c = read_servegen(examples / "data" / "servegen_m_large_14d.csv")
    assert c.windows == 2016 and c.window_s == 600
    binned = load_curve(examples / "data" / "azure_conv_15min.csv", 60)
    assert binned.windows == 15
    full = binned.rate_req_per_s[:-1]
    assert 4424 - 600 < full.sum() * 60 < 4424  # the last window is partial
    assert 0.5 < binned.rate_req_per_s[-1] / full.mean() < 2  # and its rate is not diluted by the missing part
    bad = tmp_path / "bad.csv"
    bad.write_text("0,1,1\n600,x,1\n")
    with pytest.raises(InputError, match="non-numeric"):
        read_servegen(bad)
    uneven = tmp_path / "uneven.csv"
    uneven.write_text("0,1,1\n600,1,1\n700,1,1\n")
    with pytest.raises(InputError, match="evenly spaced"):
        read_servegen(uneven)


@pytest.mark.slow
def test_autoscale_cli_on_servegen(tmp_path, examples):
    runner = CliRunner()
    out = tmp_path / "schedule.json"
    deploy = tmp_path / "deploy"
    res = runner.invoke(
        app,
        [
            "autoscale",
            str(examples / "cauchy-h800-a800-h20.yaml"),
            "--load-curve",
            str(examples / "data" / "servegen_m_large_14d.csv"),
            "--out",
            str(out),
            "--emit",
            str(deploy),
            "--json",
        ],
        env={"COLUMNS": "120"},
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    s = doc["summary"]
    assert s["windows"] == 2016 and s["schedule_usd"] <= s["static_peak_usd"]
    assert len(doc["windows"]) == 2016
    scaled = [p for p in (deploy / "kubernetes").iterdir() if "scaledobject" in p.name.lower()] or list(
        (deploy / "kubernetes").glob("*.yaml")
    )
    text = "\n".join(p.read_text() for p in scaled)
    counts = [c for c in doc["deployment"]["combos"]]
    assert all(1 <= c["min_count"] <= c["count"] for c in counts)  # pod metrics need one live copy to scale
    assert "minReplicaCount" in text and "maxReplicaCount" in text
    res = runner.invoke(app, ["report", str(out), "--format", "md"])
    assert res.exit_code == 0 and "autoscaling schedule" in res.stdout


@pytest.mark.slow
def test_flags_override_the_scenarios_curve(examples):
    runner = CliRunner()
    res = runner.invoke(
        app, ["autoscale", str(examples / "llama3-70b-azure-conv.yaml"), "--diurnal", "1,8,2", "--json"]
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["curve"]["name"] == "diurnal"
    res = runner.invoke(app, ["autoscale", str(examples / "cauchy-h800-a800-h20.yaml")])
    assert res.exit_code == 2 and "no load curve" in res.output


def test_switching_off_owned_gpus_is_never_a_saving():
    """Issue 14: owned GPUs are paid in every window; only rented GPUs beyond them are savings."""
    from dataclasses import replace

    from hetplan.catalog.offers import Offer

    owned = Offer("owned", "owned-X-8gpu", "", "X", 8, 8 * 3.0, 8, count=1)
    rented = Offer("cloud", "y1", "r", "Y", 1, 2.0, 1)
    rented_x = Offer("cloud", "x1", "r", "X", 1, 4.0, 1)
    base = req()
    rates = [0.5] * 10 + [6.0] * 10 + [0.5] * 10
    settings = ScheduleSettings(default_startup_lag_s=0.0, cooldown_s=0.0)
    only_owned = replace(base, offers=(owned,), inventory={"X": 8})
    s = summary(build_schedule(only_owned, curve(rates), settings))
    # nothing rented: the schedule costs exactly the owned fleet, whatever it switches off
    assert s["schedule_usd"] == pytest.approx(s["owned_fixed_usd"]) == pytest.approx(24.0 * s["hours"])
    assert s["static_peak_usd"] == pytest.approx(s["schedule_usd"]) and s["saving_vs_static_peak"] == 0
    assert s["owned_idle_gpu_hours"]["X"] > 0
    mixed = replace(base, offers=(owned, rented, rented_x), inventory={"X": 8})
    m = summary(build_schedule(mixed, curve(rates), settings))
    assert m["schedule_usd"] >= m["owned_fixed_usd"] - 1e-9
    assert m["schedule_usd"] <= m["static_peak_usd"] + 1e-9


def test_rented_capacity_is_priced_in_whole_instances_and_owned_idle_hours_are_reported():
    """Issue 14: beyond the owned nodes a schedule pays whole instances of the offers it rents, per window."""
    from dataclasses import replace

    from hetplan.catalog.offers import Offer

    owned = Offer("owned", "owned-X-2gpu", "", "X", 2, 2 * 1.0, 2, count=1)
    rates = [0.5] * 10 + [40.0] * 10 + [0.5] * 10
    settings = ScheduleSettings(default_startup_lag_s=0.0, cooldown_s=0.0)

    def run(size: int) -> tuple[dict, object]:
        rented = (Offer("cloud", f"x{size}", "r", "X", size, 4.0 * size, size),
                  Offer("cloud", f"y{size}", "r", "Y", size, 2.0 * size, size))  # fmt: skip
        sched = build_schedule(replace(req(), offers=(owned, *rented), inventory={"X": 2}), curve(rates), settings)
        return summary(sched), sched

    small, s_small = run(1)
    big, s_big = run(8)
    for s, sched, size in ((small, s_small, 1), (big, s_big, 8)):
        assert s["rented_site"] == "cloud/r" and s["pricing"].startswith("whole instances")
        # every window pays the owned node plus whole rented instances at the offer's price
        for w in range(sched.curve.windows):
            fleet = sched.fleets[int(sched.requested_level[w])]
            rented = [p for p in fleet.purchase if not p.owned]
            assert all(p.gpus_per_instance == size and p.usd_per_hour_each in (4.0 * size, 2.0 * size) for p in rented)
            assert fleet.usd_per_hour == pytest.approx(2.0 + sum(p.count * p.usd_per_hour_each for p in rented))
        hours = sum(v for v in s["rented_instance_hours"].values())
        assert hours > 0, "the 40 req/s windows rent beyond the owned node"
        assert s["owned_idle_gpu_hours"].get("X", 0.0) >= 0 and s["owned_fixed_usd"] == pytest.approx(2.0 * s["hours"])
        assert s["schedule_usd"] >= s["owned_fixed_usd"] - 1e-9
    # 8-GPU instances cannot cost less than the same GPUs sold one at a time at the same $/GPU-hour
    assert big["schedule_usd"] >= small["schedule_usd"] - 1e-6
    assert big["static_peak_usd"] >= small["static_peak_usd"] - 1e-6
