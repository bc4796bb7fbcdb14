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
baseline       examples/ci/baseline.json (the examples' cost gate)         tests/report/test_report.py
fidelity       tests/fixtures/perf/, catalogs/perf/error_bands.yaml        tests/unit/test_fidelity_gate.py
               (needs ../shared: skipped without it)
docs           docs/commands/, docs/reference/, docs/layout.md (gen_docs)  tests/unit/test_docs.py
outputs        every block marked ``<!-- refresh: COMMAND -->`` in README  (none: re-run here, reviewed in the diff)
               and docs/*.md; COMMAND may be ``hetplan A && hetplan B``
               (the block is the last one's output), run in a scratch
               folder holding copies of examples/ and tests/fixtures/
=============  ==========================================================  =========================================

"What moved" is, per JSON file, the dotted key paths whose values changed (at most 12 named, then a count), and per
text file the number of changed lines. A file that did not change is not printed. Nothing here reads
``../shared`` except the fidelity step, which benchmarks may.

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
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_A = "examples/llama3-70b-azure-conv.yaml"
#: A marker line before a fenced block: the block is that command's real output (``KEY=VALUE`` prefixes set
#: environment variables, ``hetplan`` runs this checkout's CLI).
MARKER = re.compile(r"^<!-- refresh: (?P<command>.+?) -->\s*$")
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
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    done = subprocess.run([*_hetplan(), *args], cwd=cwd, env=full_env, capture_output=True, text=True, check=False)
    if done.returncode != expect:
        raise SystemExit(f"hetplan {' '.join(args)} exited {done.returncode} (expected {expect}):\n{done.stderr}")
    # a failing command's message, without the progress lines it printed before (``planning: ... [0:00:00]``)
    message = "".join(line for line in done.stderr.splitlines(keepends=True) if not PROGRESS.match(line))
    return done.stdout + (message if expect else "")


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
    """Split a marker's COMMAND into ``(hetplan argv, env)`` steps, joined by ``&&``; refuse anything else.

    Each step is ``KEY=VALUE ... hetplan ARGS``; ``argv`` holds ARGS. A word that is an absolute path or climbs out
    with ``..`` is refused, so a step writes only inside the scratch folder it runs in. Raise ``SystemExit``
    naming the marker.
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
        if not part or part[0] != "hetplan":
            raise SystemExit(
                f"refresh marker command must start with 'hetplan' (and each step after '&&'): {command!r}"
            )
        for word in part[1:]:
            value = word.split("=", 1)[-1]
            if value.startswith(("/", "~")) or ".." in Path(value).parts:
                raise SystemExit(
                    f"refresh marker command may only name paths inside the checkout: {word!r} in {command!r}"
                )
        steps.append((part[1:], env))
    return steps


def refresh_text(
    text: str,
    run: Callable[..., str],
    workspace: Callable[[], contextlib.AbstractContextManager[Path]] | None = None,
) -> str:
    """Return ``text`` with each marked block's body replaced by its command's output.

    ``run(argv, env)`` runs one ``hetplan`` step (``run(argv, env, cwd)`` when ``workspace`` is given: each marker
    then runs all its steps in one fresh folder from ``workspace()``). A chained marker's block is its last step's
    output.
    """
    lines = text.split("\n")
    for command, first, end in reversed(list(output_blocks(text))):
        steps = marker_steps(command)
        with workspace() if workspace else contextlib.nullcontext() as cwd:
            out = ""
            for argv, env in steps:
                out = run(argv, env) if cwd is None else run(argv, env, cwd)
        lines[first:end] = out.rstrip("\n").split("\n")
    return "\n".join(lines)


@contextlib.contextmanager
def scratch_checkout() -> Iterator[Path]:
    """A temporary folder holding copies of ``examples/`` and ``tests/fixtures/``; removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="hetplan-refresh-") as tmp:
        folder = Path(tmp)
        shutil.copytree(ROOT / "examples", folder / "examples")
        shutil.copytree(ROOT / "tests" / "fixtures", folder / "tests" / "fixtures")
        yield folder


def _marked_pages() -> Iterator[tuple[Path, str, str]]:
    """``(page, text, refreshed text)`` for README.md and each docs/*.md page with a marked output block."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        if "<!-- refresh: " in text:
            yield path, text, refresh_text(text, run_hetplan, scratch_checkout)


def stale_outputs() -> list[str]:
    """Every marked block of README.md and docs/*.md whose command now prints something else: ``"FILE: COMMAND"``
    each (the files are not changed). ``refresh.py --check-outputs`` and ``tests/unit/test_refresh_script.py``
    (slow) use it."""
    stale = []
    for path, text, new in _marked_pages():
        old_blocks = {c: text.split("\n")[a:b] for c, a, b in output_blocks(text)}
        new_blocks = {c: new.split("\n")[a:b] for c, a, b in output_blocks(new)}
        stale += [f"{path.relative_to(ROOT)}: {c}" for c in old_blocks if old_blocks[c] != new_blocks.get(c)]
    return stale


def _outputs() -> list[Path]:
    changed = []
    for path, text, new in _marked_pages():
        if new != text:
            path.write_text(new)
        changed.append(path)
    return changed


STEPS: dict[str, Callable[[], list[Path]]] = {
    "fixtures": _fixtures,
    "golden": _golden,
    "baseline": _baseline,
    "fidelity": _fidelity,
    "docs": _docs,
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
    tracked = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "tests").rglob("*.json"))]
    tracked += [ROOT / "examples" / "ci" / "baseline.json", *sorted((ROOT / "tests" / "fixtures" / "perf").glob("*"))]
    tracked += [ROOT / "catalogs" / "perf" / "error_bands.yaml"]
    before = {p: p.read_text() for p in tracked if p.is_file()}
    touched: list[Path] = []
    for step in chosen:
        print(f"refresh: {step} ...", flush=True)
        touched += STEPS[step]()
    lines = []
    for path in dict.fromkeys(touched):
        line = moved(before.get(path), path.read_text(), str(path.relative_to(ROOT)))
        if line:
            lines.append(line)
    print("\n".join(lines) if lines else "nothing moved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
