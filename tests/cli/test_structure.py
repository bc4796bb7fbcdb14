"""The CLI's shape: no import cycles, command modules independent of each other, options declared once, and a
start-up that loads none of the heavy libraries (numbers in benchmarks/cli_startup.py)."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import hetplan.cli

CLI_DIR = Path(hetplan.cli.__file__).parent
COMMAND_MODULES = {
    f"hetplan.cli.{name}"
    for name in ("plan", "emit", "estimate", "report", "simulate", "autoscale", "catalog", "profile", "sweep")
}
#: What a command module may import from hetplan.cli (besides hetplan.api and light hetplan modules).
SHARED_MODULES = {
    "hetplan.cli",
    "hetplan.cli.app",
    "hetplan.cli.deadline",
    "hetplan.cli.options",
    "hetplan.cli.resources",
    "hetplan.cli.scenario_flags",
}
#: Libraries the CLI must not load before a command runs: each costs 0.05-0.5 s of CPU on every start.
HEAVY = ["pandas", "matplotlib", "pulp", "highspy", "jsonschema", "kubernetes_validate", "torch", "numpy", "ray",
         "pyarrow"]  # fmt: skip
#: hetplan's own modules that load those (or the catalogs' pydantic models) and so must load lazily too.
HEAVY_HETPLAN = [
    "hetplan.planning",
    "hetplan.solvers",
    "hetplan.workload",
    "hetplan.perf",
    "hetplan.sim",
    "hetplan.emit",
    "hetplan.report",
    "hetplan.autoscale",
    "hetplan.catalog",
    "hetplan.scenario",
    "hetplan.plan",
    "hetplan.sweep",
    "hetplan.executors",
]


def _module_name(path: Path) -> str:
    rel = path.relative_to(CLI_DIR.parent.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _cli_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(CLI_DIR.rglob("*.py"))}


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """hetplan.cli modules that ``path`` imports anywhere (module level or inside functions)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # "from hetplan.cli import plan" imports the module hetplan.cli.plan
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            # importing hetplan.cli.render.plan also imports its packages
            parts = target.split(".")
            for i in range(2, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix != name:
                    found.add(prefix)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _cli_modules()
    return {name: _imports(path, modules) for name, path in modules.items()}


def test_the_graph_sees_the_command_modules():
    graph = _graph()
    assert COMMAND_MODULES <= set(graph)
    assert COMMAND_MODULES <= graph["hetplan.cli.main"], "main registers every command module"


def test_cli_import_graph_is_acyclic():
    graph = _graph()
    state: dict[str, str] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                cycle = path[path.index(dep) :] + [dep] if dep in path else [node, dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, path + [dep])
        state[node] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_command_modules_import_only_shared_cli_modules():
    graph = _graph()
    for module in sorted(COMMAND_MODULES):
        allowed = {m for m in graph[module] if m in SHARED_MODULES or m.startswith("hetplan.cli.render")}
        assert graph[module] == allowed, f"{module} imports {sorted(graph[module] - allowed)}"


def test_shared_modules_import_no_command_module():
    graph = _graph()
    for module, deps in sorted(graph.items()):
        if module in COMMAND_MODULES or module in ("hetplan.cli.main", "hetplan.cli.entry"):  # entry runs main
            continue
        assert not deps & (COMMAND_MODULES | {"hetplan.cli.main"}), f"{module} imports {sorted(deps)}"


def _option_flags(path: Path) -> set[str]:
    """Long flags (``--json``) passed to ``typer.Option`` in ``path``."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        func = node.func if isinstance(node, ast.Call) else None
        if isinstance(func, ast.Attribute) and func.attr == "Option":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    flags.add(arg.value)
    return flags


def test_shared_options_are_declared_only_in_options():
    shared = _option_flags(CLI_DIR / "options.py")
    assert {"--json", "--out", "--force", "--percentile", "--model", "--workload"} <= shared
    for name, path in sorted(_cli_modules().items()):
        if name != "hetplan.cli.options":
            again = _option_flags(path) & shared
            assert not again, f"{name} declares {sorted(again)} again; use hetplan.cli.options"


def _loaded_after(code: str) -> dict[str, list[str]]:
    probe = (
        code
        + "\nimport json, sys\n"
        + f"heavy = {HEAVY!r}\n"
        + f"own = {HEAVY_HETPLAN!r}\n"
        + "print(json.dumps({'heavy': sorted({m.split('.')[0] for m in sys.modules if m.split('.')[0] in heavy}),"
        + " 'own': sorted(m for m in sys.modules if any(m == o or m.startswith(o + '.') for o in own))}))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_heavy_module():
    loaded = _loaded_after("import hetplan.cli.main")
    assert loaded == {"heavy": [], "own": []}


def test_importing_every_command_module_and_building_the_commands_loads_no_heavy_module():
    code = "\n".join(f"import {m}" for m in sorted(COMMAND_MODULES)) + (
        "\nimport hetplan.api\nimport typer.main\nfrom hetplan.cli.main import app\n"
        "typer.main.get_command(app)\n"
        "from typer.testing import CliRunner\n"
        "for args in (['--help'], ['plan', '--help'], ['sweep', '--help'], ['profile', 'fit', '--help'],\n"
        "             ['--version']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
    )
    assert _loaded_after(code) == {"heavy": [], "own": []}


def test_catalog_gpus_loads_only_the_catalog():
    code = (
        "from typer.testing import CliRunner\nfrom hetplan.cli.main import app\n"
        "assert CliRunner().invoke(app, ['catalog', 'gpus']).exit_code == 0\n"
    )
    loaded = _loaded_after(code)
    assert loaded["heavy"] == []
    assert {m.split(".")[1] for m in loaded["own"]} == {"catalog"}


def test_emit_option_defaults_are_the_emit_settings_defaults():
    """cli/emit.py spells the defaults out (importing hetplan.emit at start-up would load numpy)."""
    from hetplan.cli import emit
    from hetplan.emit.settings import EmitSettings

    params = inspect.signature(emit.emit).parameters
    defaults = EmitSettings()
    same_name = ("image", "router_image", "dynamo_image", "namespace", "provisioner", "gpu_label_key", "gpus_per_node",
                 "autoscaler", "prometheus_url", "kubernetes_version")  # fmt: skip
    for name in same_name:
        assert params[name].default == getattr(defaults, name), f"--{name.replace('_', '-')}"
    assert emit.CONNECTORS[params["kv_connector"].default] == defaults.kv_connector
    assert emit.DYNAMO_APIS[params["dynamo_api"].default] == defaults.dynamo_api_versions
