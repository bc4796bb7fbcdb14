"""Regenerate every artefact derived from hetplan's own output, on purpose, and print what moved.

After a refit of ``catalogs/perf/``, a catalog change or a planner change, several stored files stop matching what
hetplan makes today, and the tests that hold them fail red until they are refreshed *on purpose*. This script is
the one place that knows them all:

    python scripts/refresh.py                  # regenerate everything below, then print what moved
    python scripts/refresh.py --only fixtures,golden
    python scripts/refresh.py --list           # name every artefact, the test that holds it and how it is made

=============  ==========================================================  =========================================
artefact       files                                                       held by
=============  ==========================================================  =========================================
fixtures       tests/fixtures/plan_example_a.json, plan_example_a_melange  tests/unit/test_plan.py (stale check)
golden         tests/golden/report_golden.json and .md, rendered from the  tests/report/test_report.py
               frozen hand-made plan tests/fixtures/plan_report_golden.json
               (never re-planned: they move only when rendering does)
emit           tests/golden/emit/ (emitted files of the hand-made plans    tests/emit/test_golden.py
               there; the test's own update mode)
baseline       examples/ci/baseline.json (the examples' cost gate)         tests/report/test_report.py
fidelity       tests/fixtures/perf/, catalogs/perf/error_bands.yaml        tests/unit/test_fidelity_gate.py
               (needs ../shared: skipped without it)
docs           docs/commands/, docs/reference/, docs/layout.md (gen_docs)  tests/unit/test_docs.py
tables         every table marked ``<!-- refresh-table: NAME -->`` in      tests/unit/test_docs.py (fast)
               README and docs/*.md, from the gate baseline (run after
               the baseline step)
outputs        every block marked ``<!-- refresh: COMMAND -->`` in README  tests/unit/test_refresh_script.py (slow;
               and docs/*.md; COMMAND may be ``hetplan A && hetplan B``    the blocks needing ../shared only where
               (the block is the last one's output), run in a scratch      it exists)
               folder holding copies of examples/ and tests/fixtures/, or
               ``python benchmarks/NAME.py`` (run in the checkout;
               ``REFRESH_NEEDS=shared``: only where ../shared/data is)
=============  ==========================================================  =========================================

Figures that cannot be repeated byte for byte (timings, long fuzz runs) carry ``<!-- measured: COMMAND, DATE -->``
instead, and blocks that quote no output ``<!-- hand-written -->``: ``tests/unit/test_docs.py`` fails on a block or
table of figures with neither (docs/contributing.md).

"What moved" is, per JSON file, the dotted key paths whose values changed (at most 12 named, then a count), and per
text file the number of changed lines. A file that did not change is not printed. Nothing here reads
``../shared`` except the fidelity step and the benchmarks marked ``REFRESH_NEEDS=shared``, which benchmarks may.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_A = "examples/llama3-70b-azure-conv.yaml"
#: A marker line before a fenced block: the block is that command's real output (``KEY=VALUE`` prefixes set
#: environment variables, ``hetplan`` runs this checkout's CLI, ``python benchmarks/NAME.py`` a benchmark of it).
MARKER = re.compile(r"^<!-- refresh: (?P<command>.+?) -->\s*$")
#: A note before a block or table whose figures were recorded from one run of COMMAND on DATE (YYYY-MM-DD): timings,
#: or a run this script cannot repeat byte for byte. Shown as a measurement; never regenerated nor checked for drift.
MEASURED = re.compile(r"^<!-- measured: (?P<command>\S.*?), (?P<date>\d{4}-\d{2}-\d{2}) -->\s*$")
#: A note before a block or table that quotes no output: a command to type, an input file, a formula, a reference.
HAND_WRITTEN = re.compile(r"^<!-- hand-written(?:: (?P<what>.+?))? -->\s*$")
#: The data benchmarks may read; a marker with ``REFRESH_NEEDS=shared`` runs only where it exists.
SHARED = ROOT.parent / "shared" / "data"
BENCHMARK = re.compile(r"^benchmarks/[a-z0-9_]+\.py$")
#: A table row that quotes a figure with a unit (a share, a rate, a time, a ratio or a price).
TABLE_FIGURE = re.compile(r"\d[\d,.]*\s?(?:%|req/s|tok/s|ms\b|s\b|x\b|×)|\$\d")
NUMBER = re.compile(r"^[-+−]?[\d,.]*\d(?:e[-+]?\d+)?$")
PROGRESS = re.compile(r"^[a-z][\w -]*: .* \[\d+:\d\d:\d\d\]\s*$")
ENV_WORD = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def _hetplan() -> list[str]:
    return [sys.executable, "-c", "from hetplan.cli.entry import main; main()"]


def run_hetplan(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> str:
    """Run ``hetplan ARGS`` with this checkout's code, in ``cwd`` (default the checkout); return stdout.

    ``REFRESH_EXIT=N`` among a marker's ``KEY=VALUE`` words (not passed on) says the command is shown failing: it
    must exit N, and its stdout and stderr are the block (an error message shown in the docs).
    Raise ``SystemExit`` with its stderr when it exits otherwise.
    """
    env = dict(env or {})
    expect = int(env.pop("REFRESH_EXIT", "0"))
    env.pop("REFRESH_NEEDS", None)
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([*_hetplan(), *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False)
    if done.returncode != expect:
        raise SystemExit(f"hetplan {' '.join(args)} exited {done.returncode} (expected {expect}):\n{done.stderr}")
    # a failing command's message, without the progress lines it printed before (``planning: ... [0:00:00]``)
    message = "".join(line for line in done.stderr.splitlines(keepends=True) if not PROGRESS.match(line))
    return done.stdout + (message if expect else "")


def run_benchmark(args: list[str], env: dict[str, str] | None = None) -> str:
    """Run ``python benchmarks/NAME.py ARGS`` (``args[0]`` is the script) in the checkout, where it finds
    ``../shared`` if it reads it; return stdout. Raise ``SystemExit`` with its stderr when it fails."""
    env = {k: v for k, v in (env or {}).items() if k != "REFRESH_NEEDS"}
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=full_env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"python {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def run_step(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> str:
    """Run one marker step: a benchmark (``args[0]`` is ``benchmarks/NAME.py``) or ``hetplan ARGS`` in ``cwd``."""
    if args and BENCHMARK.match(args[0]):
        return run_benchmark(args, env)
    return run_hetplan(args, env, cwd)


#: The re-planned plan fixtures under tests/fixtures/: (file, strategy, with the analysis block). Every other plan
#: there is frozen by hand (tests/README.md, "Fixtures").
FIXTURES = (
    ("plan_example_a.json", "cauchy", True),
    ("plan_example_a_melange.json", "melange", False),
)


def _fixtures() -> list[Path]:
    out = []
    for name, strategy, analysis in FIXTURES:
        path = ROOT / "tests" / "fixtures" / name
        flags = ["--strategy", strategy, "--no-verify", "--out", str(path), "--force"]
        run_hetplan(["plan", EXAMPLE_A, *flags, *([] if analysis else ["--no-analysis"])])
        out.append(path)
    return out


#: The frozen, hand-made plan the golden reports render (never re-planned: see tests/README.md, "Fixtures").
GOLDEN_PLAN = "tests/fixtures/plan_report_golden.json"


def _golden() -> list[Path]:
    """Render the golden reports (JSON and Markdown) from the frozen plan: they move only when rendering does."""
    out = []
    for fmt in ("json", "md"):
        path = ROOT / "tests" / "golden" / f"report_golden.{fmt}"
        run_hetplan(["report", GOLDEN_PLAN, "--format", fmt, "--out", str(path), "--force"])
        out.append(path)
    return out


def _emit() -> list[Path]:
    """The emitters' golden files: rendered from the hand-made plans under tests/golden/emit/ by the golden test
    itself in its update mode (they move only when an emitter does)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HETPLAN_UPDATE_GOLDEN": "1"}
    test = ["-m", "pytest", "tests/emit/test_golden.py", "-q", "-p", "no:cacheprovider"]
    subprocess.run([sys.executable, *test], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return sorted(p for p in (ROOT / "tests" / "golden" / "emit").rglob("*") if p.is_file())


def _baseline() -> list[Path]:
    path = ROOT / "examples" / "ci" / "baseline.json"
    examples = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*.yaml"))
    run_hetplan(["gate", *examples, "--baseline", str(path), "--update-baseline"])
    return [path]


def _fidelity() -> list[Path]:
    if not (ROOT.parent / "shared" / "data").is_dir():
        print("fidelity: skipped (no ../shared/data beside this checkout)")
        return []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for flag in ("--refresh-fixture", "--write-error-bands"):
        subprocess.run([sys.executable, "benchmarks/fidelity.py", flag], cwd=ROOT, env=env, check=True)
    return [*sorted((ROOT / "tests" / "fixtures" / "perf").glob("*")), ROOT / "catalogs" / "perf" / "error_bands.yaml"]


def _docs() -> list[Path]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "scripts/gen_docs.py"], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return sorted((ROOT / "docs" / "commands").glob("*.md")) + sorted((ROOT / "docs" / "reference").glob("*.md"))


def output_blocks(text: str) -> Iterator[tuple[str, int, int]]:
    """Yield ``(command, first, end)`` for each marked block: lines ``first:end`` of ``text`` are its body.

    A marker is ``<!-- refresh: COMMAND -->`` on its own line, then (after any prose lines) a fenced block.
    """
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = MARKER.match(lines[i])
        if match:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            k = j + 1
            while k < len(lines) and lines[k] != "```":
                k += 1
            if k >= len(lines):
                raise SystemExit(f"refresh marker on line {i + 1} has no closed fenced block after it")
            yield match.group("command"), j + 1, k
            i = k
        i += 1


def marker_steps(command: str) -> list[tuple[list[str], dict[str, str]]]:
    """Split a marker's COMMAND into ``(argv, env)`` steps, joined by ``&&``; refuse anything else.

    Each step is ``KEY=VALUE ... hetplan ARGS`` (``argv`` holds ARGS), or the whole COMMAND is one
    ``KEY=VALUE ... python benchmarks/NAME.py ARGS`` (``argv`` holds ``benchmarks/NAME.py`` and ARGS; it runs in the
    checkout). ``REFRESH_NEEDS=shared`` marks a command that reads ``../shared/data``. A word that is an absolute
    path or climbs out with ``..`` is refused, so a step writes only inside the scratch folder it runs in. Raise
    ``SystemExit`` naming the marker.
    """
    steps: list[tuple[list[str], dict[str, str]]] = []
    parts: list[list[str]] = [[]]
    for word in shlex.split(command):
        if word == "&&":
            parts.append([])
        else:
            parts[-1].append(word)
    for part in parts:
        env: dict[str, str] = {}
        while part and ENV_WORD.match(part[0]):
            key, value = part.pop(0).split("=", 1)
            env[key] = value
        if env.get("REFRESH_NEEDS", "shared") != "shared":
            raise SystemExit(f"refresh marker: REFRESH_NEEDS takes only 'shared': {command!r}")
        benchmark = len(part) > 1 and part[0] == "python" and BENCHMARK.match(part[1]) is not None
        if benchmark and len(parts) > 1:
            raise SystemExit(f"refresh marker: a benchmark runs alone, not chained with '&&': {command!r}")
        if not part or (part[0] != "hetplan" and not benchmark):
            raise SystemExit(
                "refresh marker command must start with 'hetplan' (and each step after '&&') or be "
                f"'python benchmarks/NAME.py ...': {command!r}"
            )
        for word in part[1:]:
            value = word.split("=", 1)[-1]
            if value.startswith(("/", "~")) or ".." in Path(value).parts:
                raise SystemExit(
                    f"refresh marker command may only name paths inside the checkout: {word!r} in {command!r}"
                )
        steps.append((part[1:], env))
    return steps


def _figure_row(row: str) -> bool:
    """A table row that quotes a figure with its unit, or whose cells after the first are mostly bare numbers."""
    if TABLE_FIGURE.search(row):
        return True
    cells = [c.strip() for c in row.strip().strip("|").split("|")][1:]
    return bool(cells) and 2 * sum(1 for c in cells if NUMBER.match(c)) >= len(cells)


class Shown(NamedTuple):
    """A fenced block or a Markdown table of a docs page, with the marker or note line that says what it is (a
    NamedTuple: the tests load this script without registering it as a module, which a dataclass needs)."""

    line: int  #: 1-based line of the opening fence or of the table's header
    kind: str  #: ``"fence"`` or ``"table"``
    body: tuple[str, ...]  #: the fenced lines, or the table's rows below its header and rule
    note: str | None  #: the ``<!-- refresh/measured/hand-written ... -->`` line before it (only prose between)

    def bears_figures(self) -> bool:
        """A fence with any digit in it; a table with a figure and its unit in at least half of its rows."""
        if self.kind == "fence":
            return any(ch.isdigit() for row in self.body for ch in row)
        return 2 * sum(1 for row in self.body if _figure_row(row)) >= max(len(self.body), 1)


def shown_blocks(text: str) -> Iterator[Shown]:
    """Every fenced block and table of a Markdown page, each with the note line that precedes it.

    A note (a ``refresh:`` marker, a ``measured:`` or a ``hand-written`` note) reaches the next block or table
    across prose lines, but not across a heading.
    """
    lines = text.split("\n")
    note: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if MARKER.match(line) or TABLE_MARKER.match(line) or MEASURED.match(line) or HAND_WRITTEN.match(line):
            note = line.strip()
        elif line.startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield Shown(i + 1, "fence", tuple(lines[i + 1 : j]), note)
            note, i = None, j
        elif line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            yield Shown(i + 1, "table", tuple(lines[i + 2 : j]), note)
            note, i = None, j - 1
        elif line.startswith("#"):
            note = None
        i += 1


def needs_shared(command: str) -> bool:
    """Whether a marker's COMMAND reads ``../shared/data`` (a step carries ``REFRESH_NEEDS=shared``)."""
    return any(env.get("REFRESH_NEEDS") == "shared" for _, env in marker_steps(command))


def refresh_text(
    text: str,
    run: Callable[..., str],
    workspace: Callable[[], contextlib.AbstractContextManager[Path]] | None = None,
    skip: Callable[[str], bool] | None = None,
) -> str:
    """Return ``text`` with each marked block's body replaced by its command's output (``REFRESH_LINES=START:STOP``
    on the last step keeps that slice of its lines).

    ``run(argv, env)`` runs one step (``run(argv, env, cwd)`` when ``workspace`` is given: each marker then runs all
    its steps in one fresh folder from ``workspace()``). A chained marker's block is its last step's output. A
    marker whose COMMAND ``skip`` accepts keeps its block as it is.
    """
    lines = text.split("\n")
    for command, first, end in reversed(list(output_blocks(text))):
        steps = marker_steps(command)
        if skip is not None and skip(command):
            continue
        with workspace() if workspace else contextlib.nullcontext() as cwd:
            out = ""
            for argv, env in steps:
                cut = env.pop("REFRESH_LINES", None)
                out = run(argv, env) if cwd is None else run(argv, env, cwd)
        shown = out.rstrip("\n").split("\n")
        lines[first:end] = shown[_line_slice(cut, command)] if cut else shown
    return "\n".join(lines)


def _line_slice(cut: str, command: str) -> slice:
    """``REFRESH_LINES=START:STOP``: the output lines a block keeps, as a Python slice (``:19`` the first 19, ``:-2``
    all but the last two, ``3:`` from the fourth on): a block shows a real cut of the output, never an edit."""
    match = re.fullmatch(r"(-?\d*):(-?\d*)", cut)
    if match is None:
        raise SystemExit(f"refresh marker: REFRESH_LINES takes START:STOP (a Python slice of lines): {command!r}")
    start, stop = (int(g) if g else None for g in match.groups())
    return slice(start, stop)


@contextlib.contextmanager
def scratch_checkout() -> Iterator[Path]:
    """A temporary folder holding copies of ``examples/`` and ``tests/fixtures/``; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="hetplan-refresh-") as tmp:
        folder = Path(tmp)
        shutil.copytree(ROOT / "examples", folder / "examples")
        shutil.copytree(ROOT / "tests" / "fixtures", folder / "tests" / "fixtures")
        yield folder


def shown_pages() -> list[Path]:
    """README.md and the hand-written docs pages (docs/*.md but docs/layout.md, which gen_docs.py writes)."""
    return [ROOT / "README.md", *(p for p in sorted((ROOT / "docs").glob("*.md")) if p.name != "layout.md")]


def _marked_pages(skip: Callable[[str], bool] | None = None) -> Iterator[tuple[Path, str, str]]:
    """``(page, text, refreshed text)`` for README.md and each docs/*.md page with a marked output block; markers
    ``skip`` accepts keep their blocks."""
    for path in shown_pages():
        text = path.read_text()
        if "<!-- refresh: " in text:
            yield path, text, refresh_text(text, run_step, scratch_checkout, skip)


def stale_outputs(shared: bool = False) -> list[str]:
    """Every marked block of README.md and docs/*.md whose command now prints something else: ``"FILE: COMMAND"``
    each (the files are not changed). ``shared`` False checks the blocks that need no ``../shared/data``; True
    checks only those that do (call it only where :data:`SHARED` exists). ``refresh.py --check-outputs`` and
    ``tests/unit/test_refresh_script.py`` (slow) use it."""
    stale = []
    for path, text, new in _marked_pages((lambda c: not needs_shared(c)) if shared else needs_shared):
        old_blocks = {c: text.split("\n")[a:b] for c, a, b in output_blocks(text)}
        new_blocks = {c: new.split("\n")[a:b] for c, a, b in output_blocks(new)}
        stale += [f"{path.relative_to(ROOT)}: {c}" for c in old_blocks if old_blocks[c] != new_blocks.get(c)]
    return stale


#: A marker line before a Markdown table that ``scripts/refresh.py`` writes from a stored artefact: NAME is a key
#: of :data:`TABLES`.
TABLE_MARKER = re.compile(r"^<!-- refresh-table: (?P<name>[a-z-]+) -->\s*$")
BASELINE = ROOT / "examples" / "ci" / "baseline.json"
#: The bundled examples the tables show: (baseline key, label, what it shows (hand-written, no figures), in README).
EXAMPLES = (
    ("llama3-70b-azure-conv", "(a)", "Llama-3-70B, Azure conversation trace, five GPU types at AWS prices", True),
    (
        "cauchy-h800-a800-h20",
        "(b)",
        "an owned fleet of H800, A800 and H20, **illustrative** prices, bursty Azure code trace",
        True,
    ),
    ("llama31-8b-mooncake", "(c)", "Llama-3.1-8B, Mooncake sample (long prompts), AWS prices", True),
    (
        "llama31-8b-mooncake-reuse",
        "(c')",
        "example (c)'s model and GPUs on a Mooncake slice with `hash_ids`, sized with prefix caching "
        "([Prefix caching](simulation.md#prefix-caching))",
        False,
    ),
)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _latency(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _units(plan: dict[str, Any]) -> str:
    parts = []
    for c in plan["combos"]:
        prefill = f"{c['n_prefill']}× {c['prefill_gpu']} TP{c['prefill_tp']}"
        core = f"{prefill} → {c['n_decode']}× {c['decode_gpu']} TP{c['decode_tp']}"
        parts.append(core if c["count"] == 1 else f"{c['count']}× ({core})")
    parts += [f"{i['count']}× {i['gpu']} TP{i['tp']}" for i in plan.get("instances", [])]
    return " + ".join(parts)


def _purchases(plan: dict[str, Any]) -> str:
    return " + ".join(
        f"{p['count']} owned {p['gpu']} nodes" if p["owned"] else f"{p['count']}× `{p['instance_type']}`"
        for p in plan.get("purchase", [])
    )


def _resized(verification: dict[str, Any]) -> str:
    r = verification.get("resized") or {}
    if not r or r.get("usd_per_hour_before") == r.get("usd_per_hour_after"):
        return ""
    return f" (re-sized from ${r['usd_per_hour_before']:,.2f}/h, which missed)"


def examples_table(baseline: dict[str, Any], brief: bool = False) -> list[str]:
    """The bundled examples' table, every figure from the gate baseline's verified plans (``examples/ci/
    baseline.json``: what ``hetplan plan EXAMPLE`` makes, held by the gate test, refreshed by the baseline step).

    ``brief``: README's shorter table of examples (a)-(c) with the model-error margin; else the getting-started
    table of every example. Returns the table's lines (header included).
    """
    rows: list[str] = []
    for key, label, shows, in_readme in EXAMPLES:
        if brief and not in_readme:
            continue
        plan = baseline["scenarios"][key]
        v = plan["verification"]
        target = f"{plan['scenario']['goodput_target_req_per_s']:.3g} req/s"
        cost = f"${plan['total_usd_per_hour']:,.2f}/h"
        oos = [run["attainment"] for run in v["out_of_sample"]["runs"]]
        capacity = f"{v['analytic_capacity_req_per_s']:.2f} / {v['simulated_capacity_req_per_s']:.2f} req/s"
        strategy = plan["strategy"].capitalize()
        if brief:
            margin = f"{100 * v['model_error']['margin_step_slowdown']:.0f} %"
            rows.append(
                f"| {label} `{key}.yaml`: {shows}, {target} | {strategy}, {_units(plan)}, {cost}{_resized(v)} "
                f"| {_pct(v['attainment'])} / {', '.join(_pct(a) for a in oos)} | {margin} | {capacity} |"
            )
            continue
        router = " (prefix router)" if v.get("prefix_cache") else ""
        verdict = (
            f"{v['status']}{router}: joint {_pct(v['attainment'])}, p90 TTFT {_latency(v['ttft_p_s'])}, "
            f"TPOT {_latency(v['tpot_p_s'])}; out of sample {_pct(oos[0])} on the held-out 30 %"
        )
        if v.get("prefix_cache"):
            verdict += f"; {_pct(v['prefix_cache']['token_hit_rate'])} of prompt tokens reused in simulation"
        rows.append(
            f"| `examples/{key}.yaml` | {label} {shows}, target {target} | {strategy}: {_units(plan)} on "
            f"{_purchases(plan)}, {cost}{_resized(v)} | {verdict} | {capacity} ({v['capacity_ratio']:.2f}×) |"
        )
    columns = (
        ["scenario", "plan", "in sample / out of sample (joint)", "margin: slower steps held"]
        if brief
        else ["scenario", "what it shows", "plan", "verdict (FCFS)"]
    )
    head = "| " + " | ".join([*columns, "capacity: analytic / simulated"]) + " |"
    return [head, "|" + "---|" * head.count(" | ") + "---|", *rows]


#: Tables written from stored artefacts, by the name their ``<!-- refresh-table: NAME -->`` marker gives.
TABLES: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "examples": examples_table,
    "examples-brief": lambda baseline: examples_table(baseline, brief=True),
}


def table_blocks(text: str) -> Iterator[tuple[str, int, int]]:
    """Yield ``(name, first, end)`` for each ``<!-- refresh-table: NAME -->`` marker: lines ``first:end`` of
    ``text`` are the table after it (header included; prose and blank lines may come between)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        match = TABLE_MARKER.match(line)
        if match:
            j = i + 1
            while j < len(lines) and not lines[j].startswith(("|", "#", "```")):
                j += 1
            if j >= len(lines) or not lines[j].startswith("|"):
                raise SystemExit(f"refresh-table marker on line {i + 1} has no table after it")
            k = j
            while k < len(lines) and lines[k].startswith("|"):
                k += 1
            yield match.group("name"), j, k


def refresh_tables(text: str, baseline: dict[str, Any]) -> str:
    """``text`` with each ``refresh-table`` marker's table written anew from ``baseline``."""
    lines = text.split("\n")
    for name, first, end in reversed(list(table_blocks(text))):
        if name not in TABLES:
            raise SystemExit(f"refresh-table marker names no table this script writes: {name!r} ({', '.join(TABLES)})")
        lines[first:end] = TABLES[name](baseline)
    return "\n".join(lines)


def stale_tables() -> list[str]:
    """``"FILE: NAME"`` for each generated table of README.md and docs/*.md that differs from what the stored
    gate baseline gives now (fast: nothing is planned). ``tests/unit/test_docs.py`` uses it."""
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    stale = []
    for path in shown_pages():
        text = path.read_text(encoding="utf-8")
        new = refresh_tables(text, baseline)
        old_tables = {n: text.split("\n")[a:b] for n, a, b in table_blocks(text)}
        new_tables = {n: new.split("\n")[a:b] for n, a, b in table_blocks(new)}
        stale += [f"{path.relative_to(ROOT)}: {n}" for n in old_tables if old_tables[n] != new_tables.get(n)]
    return stale


def _tables() -> list[Path]:
    baseline = json.loads(BASELINE.read_text(encoding="utf-8"))
    changed = []
    for path in shown_pages():
        text = path.read_text(encoding="utf-8")
        if "<!-- refresh-table: " in text:
            new = refresh_tables(text, baseline)
            if new != text:
                path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def _outputs() -> list[Path]:
    if not SHARED.is_dir():
        print("outputs: blocks marked REFRESH_NEEDS=shared left as they are (no ../shared/data beside this checkout)")
    changed = []
    for path, text, new in _marked_pages(None if SHARED.is_dir() else needs_shared):
        if new != text:
            path.write_text(new)
        changed.append(path)
    return changed


#: In the order they must run: the fidelity step rewrites catalogs/perf/error_bands.yaml, which is part of the
#: catalog hash every plan records, so it runs before anything that plans.
STEPS: dict[str, Callable[[], list[Path]]] = {
    "fidelity": _fidelity,
    "fixtures": _fixtures,
    "golden": _golden,
    "emit": _emit,
    "baseline": _baseline,
    "docs": _docs,
    "tables": _tables,
    "outputs": _outputs,
}


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_flatten(sub, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for i, sub in enumerate(value):
            out.update(_flatten(sub, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def moved(before: str | None, after: str, name: str) -> str | None:
    """One line saying what changed between two versions of a file, or None if nothing did."""
    if before == after:
        return None
    if before is None:
        return f"{name}: new file"
    if name.endswith(".json"):
        try:
            old, new = _flatten(json.loads(before)), _flatten(json.loads(after))
        except json.JSONDecodeError:
            pass
        else:
            keys = sorted(k for k in old.keys() | new.keys() if old.get(k, ...) != new.get(k, ...))
            shown = ", ".join(keys[:12]) + (f", and {len(keys) - 12} more" if len(keys) > 12 else "")
            return f"{name}: {len(keys)} key(s) moved: {shown}"
    diff = difflib.ndiff(before.split("\n"), after.split("\n"))
    removed = added = 0
    for line in diff:
        removed += line.startswith("- ")
        added += line.startswith("+ ")
    return f"{name}: -{removed} +{added} line(s)"


def main(argv: list[str] | None = None) -> int:
    """Run the chosen steps in order; print what moved; exit 0 (or the failing step's error)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps (default all: {','.join(STEPS)})")
    ap.add_argument("--list", action="store_true", help="name each step and exit")
    ap.add_argument(
        "--check-outputs", action="store_true", help="write nothing; exit 1 naming each stale marked output block"
    )
    args = ap.parse_args(argv)
    if args.check_outputs:
        stale = stale_outputs()
        for line in stale:
            print(f"stale: {line}")
        print(f"{len(stale)} stale output block(s)" if stale else "every marked output block is fresh")
        return 1 if stale else 0
    if args.list:
        doc = __doc__.splitlines()
        rules = [i for i, line in enumerate(doc) if line.startswith("=====")]
        print("\n".join(line for line in doc[rules[0] + 1 : rules[-1]] if not line.startswith("=====")))
        return 0
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STEPS]
    if unknown:
        print(f"Error: unknown step(s) {', '.join(unknown)}; choose from {', '.join(STEPS)}", file=sys.stderr)
        return 2
    chosen = [s for s in STEPS if s in chosen]  # in STEPS' order, whatever order --only names them in
    tracked = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "tests").rglob("*.json"))]
    tracked += [ROOT / "examples" / "ci" / "baseline.json", *sorted((ROOT / "tests" / "fixtures" / "perf").glob("*"))]
    tracked += [ROOT / "catalogs" / "perf" / "error_bands.yaml"]
    tracked += sorted(p for p in (ROOT / "tests" / "golden").rglob("*") if p.is_file())
    before = {p: p.read_text() for p in tracked if p.is_file()}
    touched: list[Path] = []
    for step in chosen:
        print(f"refresh: {step} ...", flush=True)
        touched += STEPS[step]()
    lines = []
    for path in dict.fromkeys(touched):
        change = moved(before.get(path), path.read_text(), str(path.relative_to(ROOT)))
        if change:
            lines.append(change)
    print("\n".join(lines) if lines else "nothing moved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
