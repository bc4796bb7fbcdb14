"""Terminal output that fits (issue 16): the plan table keeps every column's information at any width (a narrow
terminal stacks tok/$ under $/h and the bound under util), the capacity line names capacity against the target,
and progress bars stay off stderr when it is not a terminal."""

import json

import pytest
from rich.console import Console

from hetplan.cli.render.plan import capacity_line, render_plan
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"


def _text(doc, width):
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    render_plan(doc, console)
    return console.export_text()


@pytest.mark.parametrize("name", ["plan_example_a.json", "plan_two_combos.json"])
@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_plan_table_shows_every_column_at_any_width(name, width):
    doc = json.loads((FIXTURES / name).read_text())
    text = _text(doc, width)
    assert max(len(line) for line in text.splitlines()) <= width
    table = text[text.index("tokens/USD (in+out)") : text.index("GPUs:")]  # the table, its two header lines too
    for header in ("$/h", "req/s", "tok/$", "TTFT", "TPOT", "util", "bound"):
        assert header in table, (width, header)
    flat = " ".join(table.split())
    for combo in doc["combos"]:
        for cell in (
            f"{combo['usd_per_hour']:.2f}",
            f"{combo['goodput_req_per_s']:.2f}",
            f"{combo['tokens_per_usd'] / 1e3:,.0f}k",
            f"{combo['utilization'] * 100:.0f}%",
            combo["bound_by"].replace("kv_transfer", "kv"),
        ):
            assert cell in flat, (width, cell)


def test_capacity_line_reads_as_capacity_against_target():
    v = {"analytic_capacity_req_per_s": 6.84, "simulated_capacity_req_per_s": 5.99, "target_req_per_s": 5.0,
         "percentile": 90, "arrivals": "trace arrivals"}  # fmt: skip
    line = capacity_line(v)
    assert "simulated 5.99 req/s, 1.20x the 5 req/s target" in line and "analytic 6.84 req/s" in line
    assert "goodput" not in line  # the served goodput (below the offered rate over a serving span) is not shown here


def test_progress_bar_is_silent_off_a_terminal():
    from hetplan.cli.render.progress import progress_bar

    console = Console(record=True, force_terminal=False)
    with progress_bar(console, "planning", 3) as bar:
        bar.text("step one")
        bar.step("two")
        bar.count(3, 3)
    assert console.export_text() == ""
    tty = Console(record=True, force_terminal=True, width=80)
    with progress_bar(tty, "planning", 3, enabled=False) as bar:  # --json
        bar.step("two")
    assert tty.export_text() == ""
