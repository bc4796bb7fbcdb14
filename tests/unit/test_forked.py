"""Planning tasks in forked worker processes (hetplan.planning.forked): same results as one after another."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from typing import Any

import pytest

from hetplan import api
from hetplan.cli.app import WORKERS_ENV, resources_from_env
from hetplan.errors import InfeasibleError, InputError
from hetplan.planning.forked import plan_workers, run_forked
from hetplan.resources import Resources
from hetplan.scenario import Scenario
from tests.conftest import EXAMPLES


def test_results_come_back_in_task_order_from_other_processes():
    me = os.getpid()
    got = run_forked([lambda i=i: (i * i, os.getpid()) for i in range(5)], workers=2)
    assert [v for v, _ in got] == [0, 1, 4, 9, 16]
    assert all(pid != me for _, pid in got)  # they did run elsewhere


def test_a_task_error_is_raised_whole_in_the_caller():
    def fails() -> int:
        raise InfeasibleError("no plan", "needs 3 req/s", "lower --goodput")

    with pytest.raises(InfeasibleError) as info:
        run_forked([lambda: 1, fails], workers=2)
    assert (info.value.what, info.value.why, info.value.fix) == ("no plan", "needs 3 req/s", "lower --goodput")


def test_workers_setting():
    assert plan_workers(2, 1) == 1
    assert plan_workers(2, 8) == 2  # never more than the tasks
    assert plan_workers(1) == 1
    with pytest.raises(ValueError, match="plan_workers"):
        Resources(plan_workers=0)


def test_the_cli_reads_the_workers_variable(monkeypatch):
    monkeypatch.setenv(WORKERS_ENV, "1")
    assert resources_from_env() == Resources(plan_workers=1)
    monkeypatch.setenv(WORKERS_ENV, " ")
    assert resources_from_env() == Resources()
    monkeypatch.setenv(WORKERS_ENV, "two")
    with pytest.raises(InputError, match=WORKERS_ENV):
        resources_from_env()


def test_the_planner_reads_no_environment_variable(monkeypatch):
    """HETPLAN_PLAN_WORKERS is the CLI's: a library caller's plan_workers is what counts."""
    monkeypatch.setenv(WORKERS_ENV, "two")  # would be an error if the library read it
    plan = api.plan(_small("auto-quantized"), strategy="cauchy", analysis=False, resources=Resources(plan_workers=1))
    assert len(plan.dtype_search or ()) == 2


def _small(weight_dtype: str) -> Scenario:
    return Scenario(
        model="Llama-3.1-8B", workload={"path": str(EXAMPLES / "data" / "azure_conv_15min.csv")},
        gpus=["H100", "L4"], cloud="aws", goodput_req_per_s=3.0, weight_dtype=weight_dtype,
    )  # fmt: skip


def _with_two_and_one_worker(make) -> list[str]:
    """The plan document (JSON text) made with two worker processes allowed, then with one."""
    return [json.dumps(api.to_doc(make(Resources(plan_workers=workers)))) for workers in (2, 1)]


def test_auto_dtype_plan_is_byte_identical_in_processes_and_in_one():
    """``--weight-dtype auto-quantized`` plans bf16 and fp8; in two processes or one, the plan is the same, byte for
    byte."""
    docs = _with_two_and_one_worker(
        lambda r: api.plan(_small("auto-quantized"), strategy="all", analysis=False, resources=r)
    )
    assert docs[0] == docs[1]
    assert len(json.loads(docs[0])["dtype_search"]) == 2


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_an_interrupt_while_waiting_stops_the_workers(tmp_path):
    """Ctrl-C or --timeout in the caller (here SIGALRM raising in the main thread) terminates the workers at once."""
    import signal
    import time

    def slow(i: int) -> int:
        (tmp_path / f"pid{i}").write_text(str(os.getpid()))
        time.sleep(60)
        return i

    class Stop(Exception):
        pass

    def expire(signum, frame):
        raise Stop

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    started = time.monotonic()
    try:
        with pytest.raises(Stop):
            run_forked([lambda i=i: slow(i) for i in range(2)], workers=2)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - started < 10
    pids = [int((tmp_path / f"pid{i}").read_text()) for i in range(2)]
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_state(p) not in ("gone", "Z") for p in pids):
        time.sleep(0.05)
    assert all(_state(p) in ("gone", "Z") for p in pids)


@pytest.mark.slow
def test_verified_plan_with_analysis_is_the_same_when_the_analysis_runs_ahead():
    """plan --verify with the analysis: the analysed re-plan runs in a second process while this one simulates;
    the plan is byte-identical to the one-process run."""
    docs = _with_two_and_one_worker(
        lambda r: api.plan_verified(_small("bf16"), "cauchy", analysis=True, resize=True, resources=r)
    )
    assert docs[0] == docs[1]
    assert "analysis" in json.loads(docs[0]) and json.loads(docs[0])["verification"]["status"] == "verified"


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_a_verified_plan_with_analysis_is_solved_once(monkeypatch, tmp_path, workers):
    """plan --verify with the analysis (the CLI default): the analysis comes from the planner that made the plan,
    in this process (one worker) or a forked copy of it (two), not from solving the same plan a second time."""
    from hetplan.planning import pipeline

    solves = tmp_path / "solves"  # a file: a forked process's solves count too
    real = pipeline.build_plan

    def counted(*args, **kwargs):
        with solves.open("a") as f:
            f.write("solve\n")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "build_plan", counted)
    made = api.plan_verified(_small("bf16"), "cauchy", analysis=True, resources=Resources(plan_workers=workers))
    assert solves.read_text().count("solve") == 1
    assert made.analysis is not None and made.analysis.price_sensitivity
    assert made.verification is not None and made.verification.status in ("verified", "not verified")


def _fails_at_the_asked_headroom(base: float) -> type:
    """A stand-in for :class:`hetplan.sim.verify.PlanCheck`: a plan made at ``base`` headroom misses (its simulated
    capacity 80 % of the analytic one), a plan made for more demand holds, so verification re-sizes."""
    from hetplan.plan.blocks import Verification

    class _Check:
        def __init__(self, plan: Any, *_: Any) -> None:
            self.plan = plan

        def verdict(self, capacity: str = "full") -> Verification:
            p = self.plan
            ok = p.headroom > base + 1e-9
            return Verification.from_doc(
                {"status": "verified" if ok else "not verified", "attainment": 0.95 if ok else 0.6, "dropped": 0,
                 "simulated_capacity_req_per_s": p.goodput_req_per_s * (1.0 if ok else 0.8),
                 "misses": [] if ok else ["joint attainment"],
                 "out_of_sample": {"status": "holds" if ok else "misses", "runs": []}}
            )  # fmt: skip

    return _Check


@pytest.mark.parametrize("workers", [1, 2])
def test_a_resized_plan_is_made_whole_from_the_planner_that_made_it(monkeypatch, tmp_path, workers):
    """Issue 29: the re-sized plan kept (a lean attempt: its strategy alone) gets its baselines and analysis from the
    planner that made it, in this process (one worker) or a forked copy of it (two): no demand is planned twice,
    and the plan equals the one planned whole at its headroom."""
    import hetplan.sim.verify as sim_verify
    from hetplan.planning import pipeline
    from hetplan.planning.verify import DEFAULT_HOLDOUT, verification_workloads

    scenario = _small("bf16")
    made_at = tmp_path / "headrooms"  # a file: a forked process's plans count too
    real = pipeline.build_plan

    def counted(req: Any, sc: Scenario, *args: Any, **kwargs: Any) -> Any:
        with made_at.open("a") as f:
            f.write(f"{sc.headroom!r}\n")
        return real(req, sc, *args, **kwargs)

    monkeypatch.setattr(pipeline, "build_plan", counted)
    monkeypatch.setattr(sim_verify, "PlanCheck", _fails_at_the_asked_headroom(scenario.headroom))
    made = api.plan_verified(scenario, "cauchy", analysis=True, resize=True, confidence=None,
                             resources=Resources(plan_workers=workers))  # fmt: skip
    planned = made_at.read_text().split()
    assert made.verification is not None and made.verification.resized is not None
    assert len(planned) >= 2 and len(set(planned)) == len(planned), planned  # each demand planned once
    assert made.analysis is not None and made.analysis.price_sensitivity and made.baselines
    monkeypatch.setattr(pipeline, "build_plan", real)
    sized = verification_workloads(scenario, DEFAULT_HOLDOUT)[0]  # the trace's head, as verification sizes on it
    whole = api.plan(sized.model_copy(update={"headroom": made.headroom}), "cauchy", analysis=True)
    assert api.to_doc(replace(made, verification=None)) == api.to_doc(whole)
