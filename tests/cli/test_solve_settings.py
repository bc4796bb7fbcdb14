"""How MILPs run is one explicit value (hetplan.solvers.milp.SolveSettings) that the CLI builds from
``HETPLAN_SOLVE_THREADS`` and ``HETPLAN_SLICE_PRESOLVE`` (hetplan.cli.resources) and passes down; the solvers read
no environment variable."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hetplan.cli.main import app
from hetplan.cli.resources import solve_settings
from hetplan.errors import InputError
from hetplan.solvers.milp import SLICE_PRESOLVE, SolveSettings
from tests.conftest import EXAMPLES, ROOT


def test_defaults_when_unset_or_empty() -> None:
    assert solve_settings({}) == SolveSettings()
    assert solve_settings({"HETPLAN_SOLVE_THREADS": " ", "HETPLAN_SLICE_PRESOLVE": ""}) == SolveSettings()
    assert SolveSettings().slice_presolve == SLICE_PRESOLVE and SolveSettings().threads is None


def test_the_variables_set_the_values() -> None:
    got = solve_settings({"HETPLAN_SOLVE_THREADS": "1", "HETPLAN_SLICE_PRESOLVE": "OFF"})
    assert got == SolveSettings(threads=1, slice_presolve="off")
    assert solve_settings({"HETPLAN_SOLVE_THREADS": "3"}).threads == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [("HETPLAN_SOLVE_THREADS", "0"), ("HETPLAN_SOLVE_THREADS", "two"), ("HETPLAN_SOLVE_THREADS", "1e9"),
     ("HETPLAN_SLICE_PRESOLVE", "bogus"), ("HETPLAN_SLICE_PRESOLVE", "2")],
)  # fmt: skip
def test_bad_values_are_refused_naming_the_variable(name: str, value: str) -> None:
    with pytest.raises(InputError, match=name) as info:
        solve_settings({name: value})
    assert info.value.fix and name in info.value.fix


def test_plan_refuses_a_bad_value_with_one_error_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(
        app,
        ["plan", str(EXAMPLES / "llama3-70b-azure-conv.yaml"), "--no-verify", "--out", str(tmp_path / "p.json")],
        env={"COLUMNS": "200", "HETPLAN_SLICE_PRESOLVE": "bogus"},
    )
    assert res.exit_code == 2, res.output
    assert "Error: HETPLAN_SLICE_PRESOLVE='bogus' is not a HiGHS presolve mode" in res.output
    assert "Traceback" not in res.output and list(tmp_path.iterdir()) == []


def _environ_reads(path: Path) -> list[int]:
    """Lines of ``path`` that touch ``os.environ`` or call ``os.getenv``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("environ", "getenv")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ]


def test_the_solvers_read_no_environment_variable() -> None:
    found = {
        str(p.relative_to(ROOT)): lines
        for p in sorted((ROOT / "hetplan" / "solvers").glob("*.py"))
        if (lines := _environ_reads(p))
    }
    assert found == {}
