"""The docs cannot drift from the code: the command pages and the scenario reference are what
``scripts/gen_docs.py`` generates now, the reference lists every field a scenario file accepts, the MkDocs nav
names pages that exist, and README's test command is the one CI runs."""

import datetime
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import typing

import pytest
import yaml
from pydantic import BaseModel

from hetplan.scenario import Scenario
from tests.conftest import ROOT


def _gen_docs():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_fresh():
    gen = _gen_docs()
    stale = gen.stale(gen.pages(with_test_counts=False))
    assert not stale, f"stale docs pages {[str(p.relative_to(ROOT)) for p in stale]}: run python scripts/gen_docs.py"


@pytest.mark.slow
def test_the_test_counts_in_tests_readme_are_fresh():
    """``tests/README.md``'s counts are pytest's own (a collection of the whole suite: half a minute). They count
    the full install CI makes (.ci/run: torch and the profiler package too); without those, the profiler's test
    modules skip at collection and the count is smaller, which says nothing about the page (README's plain
    ``pip install ".[test]" && pytest`` failed here in a fresh clone)."""
    missing = [name for name in ("hetplan_profiler", "torch") if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the counts are of the full install; this one lacks {', '.join(missing)}")
    gen = _gen_docs()
    total, slow = gen.test_counts()
    assert total > 900 and 0 < slow < total
    assert gen.TESTS_README.read_text(encoding="utf-8") == gen.tests_readme_page((total, slow)), (
        "tests/README.md's test counts are stale: run python scripts/gen_docs.py"
    )


def test_layout_lists_every_module():
    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    for path in sorted((ROOT / "hetplan").rglob("*.py")):
        folder = path.parent.relative_to(ROOT).as_posix()
        assert f"### `{folder}/`" in page, f"docs/layout.md lacks the package {folder}"
        if path.name != "__init__.py":
            section = page[page.index(f"### `{folder}/`") :].split("\n### ")[0]
            assert f"- `{path.name}`: " in section, f"docs/layout.md lacks {path.relative_to(ROOT)}"


def test_a_module_summary_is_its_first_sentence_in_markdown(tmp_path):
    gen = _gen_docs()
    module = tmp_path / "m.py"
    module.write_text('"""Reads :func:`~a.b` and ``x``. More.\n\nDetails."""\n', encoding="utf-8")
    assert gen.module_summary(module) == "Reads `b` and `x`."
    module.write_text("x = 1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no module docstring"):
        gen.module_summary(module)


def _accepted_fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key a scenario file may hold, walked from the pydantic models (not from the generator)."""
    names: set[str] = set()
    for name, info in model.model_fields.items():
        key = prefix + (info.alias or name)
        names.add(key)
        for arg in typing.get_args(info.annotation) or (info.annotation,):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                names |= _accepted_fields(arg, key + ".")
    names |= {prefix + n for n in getattr(model, "SECONDS_FIELDS", {})}
    return names


def test_scenario_reference_lists_every_field():
    page = (ROOT / "docs" / "reference" / "scenario.md").read_text()
    listed = set(re.findall(r"^\| `([a-z0-9_.]+)` \|", page, flags=re.M))
    accepted = _accepted_fields(Scenario)
    assert accepted - listed == set(), "fields missing from docs/reference/scenario.md"
    assert listed - accepted == set(), "fields documented that scenario.py does not accept"
    assert len(accepted) > 40  # the walk found the nested models, not just the top level


def test_every_command_has_a_page():
    gen = _gen_docs()
    pages = {p.stem for p in gen.command_pages()} - {"index"}
    root = gen._root()
    ctx = gen._context(root, "hetplan")
    assert pages == set(root.list_commands(ctx))
    plan = (ROOT / "docs" / "commands" / "plan.md").read_text()
    assert "`--percentile <str>`" in plan and "p90, 90% or 0.9 (a bare number is a fraction" in plan


def _nav_pages(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from _nav_pages(value)


def test_mkdocs_nav_pages_exist():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    pages = list(_nav_pages(config["nav"]))
    missing = [p for p in pages if not (ROOT / "docs" / p).is_file()]
    assert not missing and len(pages) == len(set(pages))
    # a page another branch adds before it is in the nav must not fail the strict build
    assert config["validation"]["omitted_files"] == "info" and config["strict"] is True


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mkdocs") is None, reason="needs the docs extra: pip install '.[docs]'")
def test_mkdocs_build_strict(tmp_path):
    run = subprocess.run(
        [str(shutil.which("mkdocs")), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_readme_test_command_is_the_one_ci_runs():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"^```bash\n(.*?)^```", readme, flags=re.M | re.S)
    assert block is not None
    commands = [line for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2 and commands[0].startswith("pip install . && hetplan plan examples/")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert commands[1] in ci, f"README's second command {commands[1]!r} is not a line of .ci/run"
    assert len(readme.splitlines()) <= 200


def test_readme_and_docs_links_resolve():
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", md.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            assert (md.parent / target).exists(), f"{md.relative_to(ROOT)} links to missing {target}"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_every_flag_the_api_names_exists():
    """hetplan/api.py's docstrings name CLI flags as the twin of each function: each must be a real option."""
    gen = _gen_docs()

    def options(command) -> set[str]:
        ctx = gen._context(command, "hetplan")
        found = {opt for p in command.get_params(ctx) for opt in (*p.opts, *p.secondary_opts)}
        for name in getattr(command, "list_commands", lambda _: [])(ctx):
            found |= options(command.get_command(ctx, name))
        return found

    known = options(gen._root())
    named = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", (ROOT / "hetplan" / "api.py").read_text()))
    assert named and named <= known, f"hetplan/api.py names flags no command has: {sorted(named - known)}"


def _refresh():
    spec = importlib.util.spec_from_file_location("refresh", ROOT / "scripts" / "refresh.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_figure_shown_in_readme_and_docs_is_regenerated_or_dated():
    """Issue 31 item 6, the fast half: every fenced block with a digit and every table of figures in README.md and
    docs/*.md says what it is, on the line before it (prose may come between):

    - ``<!-- refresh: COMMAND -->``: the command's real output, rewritten by ``scripts/refresh.py --only outputs``
      and compared with a fresh run by the slow tests of ``tests/unit/test_refresh_script.py``;
    - ``<!-- refresh-table: NAME -->``: a table ``scripts/refresh.py --only tables`` writes from a stored artefact
      (the examples' verified plans in the gate baseline), held by the next test;
    - ``<!-- measured: COMMAND, YYYY-MM-DD -->``: figures from one run (timings, runs the script cannot repeat byte
      for byte), dated, never checked for drift;
    - ``<!-- hand-written[: what] -->``: no output at all (commands to type, input files, formulas, references).

    A new block of pasted output fails here until it is marked."""
    refresh = _refresh()
    bare, wrong = [], []
    for page in refresh.shown_pages():
        for block in refresh.shown_blocks(page.read_text(encoding="utf-8")):
            where = f"{page.relative_to(ROOT)}:{block.line}"
            if block.note is None:
                if block.bears_figures():
                    bare.append(where)
            elif table := refresh.TABLE_MARKER.match(block.note):
                if block.kind != "table" or table["name"] not in refresh.TABLES:
                    wrong.append(f"{where}: a refresh-table marker must precede a table scripts/refresh.py writes")
            elif refresh.MARKER.match(block.note):
                if block.kind != "fence":
                    wrong.append(f"{where}: a refresh marker must precede a fenced block")
                else:
                    refresh.marker_steps(refresh.MARKER.match(block.note).group("command"))  # raises when malformed
            elif measured := refresh.MEASURED.match(block.note):
                if (
                    not datetime.date(2026, 1, 1)
                    <= datetime.date.fromisoformat(measured["date"])
                    <= datetime.date.today()
                ):
                    wrong.append(f"{where}: measured on {measured['date']}?")
    assert not wrong, wrong
    assert not bare, (
        f"blocks or tables of figures with no refresh marker nor a measured/hand-written note: {bare} "
        "(docs/contributing.md, 'Generated docs')"
    )


def test_the_examples_tables_are_what_the_gate_baseline_says():
    """README's and getting-started's examples tables are written from ``examples/ci/baseline.json`` (the verified
    plans the cost gate holds): a refreshed baseline with other figures fails here until ``python
    scripts/refresh.py --only tables`` rewrites them. Fast: nothing is planned."""
    refresh = _refresh()
    stale = refresh.stale_tables()
    assert not stale, f"stale generated tables (python scripts/refresh.py --only tables): {stale}"
    pages = {p.name: p.read_text(encoding="utf-8") for p in refresh.shown_pages()}
    assert "<!-- refresh-table: examples -->" in pages["getting-started.md"]
    assert "<!-- refresh-table: examples-brief -->" in pages["README.md"]


def test_measured_pages_say_how_their_figures_were_made():
    """Pages whose figures are measurements say so at the top, and every page that shows a benchmark's output that
    needs ``../shared`` says that its check is skipped without it."""
    refresh = _refresh()
    for page in refresh.shown_pages():
        text = page.read_text(encoding="utf-8")
        if "REFRESH_NEEDS=shared" in text:
            assert "../shared" in text, f"{page.relative_to(ROOT)} shows a benchmark on ../shared without saying so"
    for name in ("accuracy.md", "speed.md"):
        head = (ROOT / "docs" / name).read_text(encoding="utf-8").split("\n## ")[0]
        assert "measured" in head and "refresh" in head, f"docs/{name} does not say how its figures are made"
