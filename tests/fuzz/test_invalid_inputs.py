"""Property-based fuzzing of the commands' inputs (Hypothesis): every generated input ends in exit 0, 1 or 2,
with an ``Error:`` line when it is not 0, never a traceback, and never a half-written output.

Run in CI with a fixed seed and a bounded number of examples (the ``ci`` profile in ``tests/conftest.py``); the
longer run is ``pytest tests/fuzz --hypothesis-profile=fuzz`` (tests/README.md). With ``HETPLAN_FUZZ_LOG=FILE``
each input's command and outcome is appended to FILE as one JSON line; ``benchmarks/fuzz_report.py`` runs the
fuzz profile that way and prints the reliability figures.
"""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hetplan.cli.main import app
from tests.conftest import EXAMPLES, FIXTURES

pytestmark = pytest.mark.fuzz
RUNNER = CliRunner()
ENV = {"COLUMNS": "120", "NO_COLOR": "1"}
PLAN_DOC = json.loads((FIXTURES / "plan_example_a.json").read_text())
SCENARIO_DOC = yaml.safe_load((EXAMPLES / "llama3-70b-azure-conv.yaml").read_text())
TRACE = FIXTURES / "azure_conv_200.csv"
DOCUMENTED_EXITS = {0, 1, 2, 124}  # docs/reliability.md; 124: --timeout
#: One input taking longer than this counts as a hang (the slowest bad input seen takes a few seconds).
HANG_S = 60.0

# values at the edges: tiny, huge, negative, non-finite, wrong types, Unicode digits, nested shapes, and the
# documented bounds (work past hetplan.budget's budgets is refused with the numbers: tests/cli/test_work_budget.py)
EDGE_SCALARS = st.one_of(
    st.sampled_from([0, -1, 1e-300, 1e-5, 1e300, 10**400, -(10**30), "inf", "nan", "-inf", "²", "٣", "", "1e-05",
                     "5 s", "80ms", "p90", "90%", "0.9", True, False, None, "H100", "x" * 300,
                     "2023-11-16 18:15:46.68+05:00", "2023-11-16 18:15:46.68", "1999-01-01", 1e17,
                     # documented maxima and minima (rates and goodputs, lengths; docs/reference/scenario.md)
                     1e7, 1e-6, 10_000_000]),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)  # fmt: skip
EDGE_VALUES = st.recursive(
    EDGE_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value in ``doc`` (maps and lists)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete and isinstance(node, dict):
        node.pop(path[-1], None)
    else:
        node[path[-1]] = value
    return doc


def _write(path: Path, doc: Any) -> None:
    try:
        text = json.dumps(doc, allow_nan=True, default=str) if path.suffix == ".json" else yaml.safe_dump(doc)
    except (ValueError, OverflowError, yaml.YAMLError):
        text = str(doc)
    path.write_text(text, encoding="utf-8")


def _label(args: list[str]) -> str:
    """The command an input was tried on, as docs/reliability.md counts them (``profile merge``, ``find-capacity``)."""
    subs = ("merge", "fit", "gpus", "models", "prices", "import-prices")
    if args[0] in ("profile", "catalog") and len(args) > 1 and args[1] in subs:
        return f"{args[0]} {args[1]}"
    if args[0] == "simulate" and "--find-capacity" in args:
        return "find-capacity"
    if args[0] == "plan" and "hetis" in args:
        return "plan (hetis)"
    return args[0]


def _check(args: list[str], out_files: list[Path] = ()) -> Any:
    """Run ``hetplan ARGS`` in-process; every outcome is checked (and logged with HETPLAN_FUZZ_LOG): a documented
    exit code, an ``Error`` line when not 0, no traceback, and no output (or temporary file) left by a failed
    command. Returns the runner's result."""
    start = time.perf_counter()
    res = RUNNER.invoke(app, args, env=ENV)
    elapsed = time.perf_counter() - start
    exc = res.exception if not isinstance(res.exception, SystemExit) else None
    # a cost gate that fails is a verdict, not an error: exit 1 after writing the complete report (documented)
    verdict = res.exit_code == 1 and "gate FAIL" in res.output
    failed = bool(res.exit_code) and not verdict
    left = [str(f) for f in out_files if failed and f.exists()]
    for f in out_files:  # temporary files of the atomic writer
        if f.parent.is_dir():
            left += [p.name for p in f.parent.iterdir() if p.name.startswith(f".{f.name}.")]
    record = {"command": _label(args), "exit": res.exit_code, "traceback": exc is not None, "left": left,
              "no_error_line": failed and "Error" not in res.output, "gate_fail": verdict,
              "seconds": round(elapsed, 3)}  # fmt: skip
    log = os.environ.get("HETPLAN_FUZZ_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
    assert exc is None, f"{args[0]} raised {type(exc).__name__}: {exc}"
    assert res.exit_code in DOCUMENTED_EXITS, (res.exit_code, res.output[-400:])
    assert not record["no_error_line"], res.output[-400:]  # "Error:" lines; typer usage errors box the word
    assert not left, f"{left} written by a failed {args[0]}"
    assert elapsed < HANG_S, f"{args[0]} took {elapsed:.0f} s on one input"
    return res


PATHS_PLAN = [p for p in _paths(PLAN_DOC) if p[0] not in ("analysis",)]
PATHS_SCENARIO = _paths(SCENARIO_DOC)
FUZZ = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)


@FUZZ
@given(
    path=st.sampled_from(PATHS_PLAN),
    value=EDGE_VALUES,
    delete=st.booleans(),
    suffix=st.sampled_from([".json", ".yaml"]),
)
def test_hand_edited_plan_files(tmp_path_factory, path, value, delete, suffix):
    folder = tmp_path_factory.mktemp("plan")
    plan = folder / f"plan{suffix}"
    _write(plan, _mutate(PLAN_DOC, path, value, delete))
    _check(["report", str(plan), "--format", "json", "--out", str(folder / "r.json")], [folder / "r.json"])
    _check(["emit", str(plan), "--out", str(folder / "deploy"), "--target", "vllm"])
    _check(["simulate", str(plan), "--trace", str(TRACE), "--max-requests", "20", "--out", str(folder / "m.json")],
           [folder / "m.json"])  # fmt: skip


@pytest.mark.slow
@FUZZ
@given(path=st.sampled_from(PATHS_SCENARIO), value=EDGE_VALUES, delete=st.booleans())
def test_hand_edited_scenario_files(tmp_path_factory, path, value, delete):
    folder = tmp_path_factory.mktemp("scenario")
    doc = _mutate(SCENARIO_DOC, path, value, delete)
    if isinstance(doc.get("workload"), dict) and "path" in doc["workload"]:
        doc["workload"]["path"] = str(TRACE)
    scenario = folder / "s.yaml"
    _write(scenario, doc)
    _check(["plan", str(scenario), "--no-analysis", "--out", str(folder / "p.json")], [folder / "p.json"])


FLAG_VALUES = st.one_of(
    EDGE_SCALARS.map(str),
    st.sampled_from(
        ["H100=²", "H100=-1", "1,2,,4", "0", "7", "99999999", "H100=16,H100=8", "bogus", "=", ",", "1e-300"]
    ),
)


@FUZZ
@given(
    flag=st.sampled_from(["--goodput", "--ttft", "--tpot", "--percentile", "--tp", "--inventory", "--gpus", "--rate",
                          "--headroom", "--max-ratio", "--weight-dtype", "--kv-dtype", "--cloud", "--synthetic"]),
    value=FLAG_VALUES,
)  # fmt: skip
def test_plan_flags(tmp_path_factory, flag, value):
    folder = tmp_path_factory.mktemp("flags")
    args = ["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--gpus", "H100,A100",
            "--no-analysis", "--out", str(folder / "p.json")]  # fmt: skip
    if flag in args:
        args[args.index(flag) + 1] = value
    else:
        args[1:1] = [flag, value]
    _check(args, [folder / "p.json"])


@FUZZ
@given(rows=st.lists(st.tuples(EDGE_SCALARS, EDGE_SCALARS, EDGE_SCALARS), min_size=0, max_size=6),
       header=st.sampled_from(["TIMESTAMP,ContextTokens,GeneratedTokens", "a,b,c", ""]))  # fmt: skip
def test_bad_traces(tmp_path_factory, rows, header):
    folder = tmp_path_factory.mktemp("trace")
    trace = folder / "t.csv"
    trace.write_text("\n".join([header, *(",".join(map(str, r)) for r in rows)]) + "\n", encoding="utf-8")
    _check(["simulate", str(FIXTURES / "plan_example_a.json"), "--trace", str(trace), "--out", str(folder / "m.json")],
           [folder / "m.json"])  # fmt: skip
    _check(["plan", "--model", "Llama-3-8B", "--workload", str(trace), "--gpus", "H100", "--goodput", "1",
            "--no-analysis"])  # fmt: skip


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(["schema_version", "kind", "source", "as_of", "illustrative", "notes",
                                            "usd_per_gpu_hour", "extra"]), EDGE_VALUES, max_size=6))  # fmt: skip
def test_bad_price_files(tmp_path_factory, doc):
    folder = tmp_path_factory.mktemp("prices")
    prices = folder / "prices.yaml"
    _write(prices, doc)
    _check(["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--prices", str(prices),
            "--no-analysis"])  # fmt: skip
