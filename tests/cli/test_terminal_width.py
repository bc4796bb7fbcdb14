"""Terminal output that fits (issue 16): the plan table keeps every column's information at any width (a narrow
terminal stacks tok/$ under $/h and the bound under util), the capacity line names capacity against the target,
and progress bars stay off stderr when it is not a terminal."""

import json

import pytest
from rich.console import Console

from hetplan.cli.render.plan import capacity_line, render_plan
from hetplan.plan.blocks import Verification
from hetplan.plan.doc import from_doc
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures"


def _text(doc, width):
    console = Console(width=width, record=True, force_terminal=False, color_system=None)
    render_plan(from_doc(doc), console)
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
    line = capacity_line(Verification.from_doc(v))
    assert "simulated 5.99 req/s, 1.20x the 5 req/s target" in line and "analytic 6.84 req/s" in line
    assert "goodput" not in line  # the served goodput (below the offered rate over a serving span) is not shown here


def test_progress_off_a_terminal_is_plain_status_lines():
    """Off a terminal (a pipe, a log, --json) progress is one plain line per step, no control codes; a long step
    is repeated every heartbeat with the time so far (a 16-minute re-size printed nothing before)."""
    import time

    from hetplan.cli.render.progress import StepLog, progress_bar

    console = Console(record=True, force_terminal=False, width=200)
    log = StepLog()
    with progress_bar(console, "planning", 3, log=log, heartbeat_s=0.3) as bar:
        bar.text("step [one]")
        bar.step("two")
        time.sleep(0.9)  # a long step: repeated by the heartbeat
        bar.count(3, 3)
    lines = console.export_text().splitlines()
    assert lines[0] == "planning: step [one] (0/3) [0:00:00]"
    assert lines[1] == "planning: two (1/3) [0:00:00]"
    assert len(lines) >= 3 and all(line.startswith("planning: two (") for line in lines[2:])
    assert "\x1b" not in console.export_text()
    assert log.describe() == "two"
    tty = Console(record=True, force_terminal=True, width=80)
    with progress_bar(tty, "planning", 3, enabled=False) as bar:  # --json on a terminal: lines, no bar
        bar.step("two")
    assert tty.export_text().strip() == "planning: two (1/3) [0:00:00]"
