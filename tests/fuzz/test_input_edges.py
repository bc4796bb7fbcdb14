"""Generated inputs of issue 35's input classes, on every command that reads them: numbers at the edges, structure
(keys that are lists or maps, deep nesting), special files, CSV tables with a column named twice or extra cells,
timestamps centuries apart, and shares that could read two ways. Every input here is bad by construction, so each
must end in exit 2 (or 1) with an ``Error`` line: never exit 0, never a traceback, never a hang, nothing written.

CI runs the ``ci`` profile (tests/conftest.py: fixed seed, at most 25 examples a test); the long run is
``pytest tests/fuzz --hypothesis-profile=fuzz`` (tests/README.md).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hetplan.errors import InputError
from tests.conftest import EXAMPLES, FIXTURES
from tests.fuzz.test_invalid_inputs import FUZZ, PLAN_DOC, SCENARIO_DOC, TRACE, _check
from tests.profiler.helpers import make_profile_doc

pytestmark = pytest.mark.fuzz
PLAN = FIXTURES / "plan_example_a.json"
SCENARIO = EXAMPLES / "llama3-70b-azure-conv.yaml"
CONFIG = {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 16, "num_key_value_heads": 8,
          "intermediate_size": 5632, "vocab_size": 32000, "max_position_embeddings": 4096}  # fmt: skip
PRICES = {
    "schema_version": 1,
    "kind": "prices",
    "source": "t",
    "as_of": "2026-01-01",
    "usd_per_gpu_hour": {"H100": 2.0},
}

# Numbers past the rule (hetplan.input_checks.check_number: finite, |x| <= 1e15), as the text a file holds.
EDGE_NUMBER_TEXT = st.one_of(
    st.integers(min_value=16, max_value=6000).map(lambda n: "9" * n),  # 16 to 6,000 digits
    st.sampled_from(["1e308", "-1e308", "1.7976931348623157e308", "1e16", "-1e300"]),
)


def _documents(folder: Path, suffix: str) -> dict[str, tuple[dict, list[str]]]:
    """Each input document kind: its valid content and the command that reads it (``{}`` marks the file)."""
    trace = str(TRACE)
    return {
        "scenario": ({**SCENARIO_DOC, "workload": {"path": trace}}, ["plan", "{}", "--no-analysis", "--no-verify"]),
        "plan": (PLAN_DOC, ["report", "{}", "--format", "json"]),
        "baseline": (PLAN_DOC, ["report", str(PLAN), "--baseline", "{}"]),
        "prices": (PRICES, ["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--gpus",
                            "H100", "--prices", "{}", "--no-analysis", "--no-verify"]),
        "config": (CONFIG, ["estimate", "--model", "{}", "--gpu", "H100"]),
        "profile": (make_profile_doc(gpu="H100"), ["estimate", "--model", "Llama-3-8B", "--gpu", "H100",
                                                   "--profile", "{}"]),
    }  # fmt: skip


def _numeric_paths(doc, prefix=()):
    """Paths to the numbers of ``doc`` (where an edge number replaces a sensible one)."""
    if isinstance(doc, dict):
        return [p for k, v in doc.items() for p in _numeric_paths(v, (*prefix, k))]
    if isinstance(doc, list):
        return [p for i, v in enumerate(doc[:2]) for p in _numeric_paths(v, (*prefix, i))]
    return [prefix] if isinstance(doc, int | float) and not isinstance(doc, bool) else []


MARK = "__EDGE__"


def _text_with(doc, path, raw: str, suffix: str) -> str:
    """``doc`` as JSON or YAML with the value at ``path`` replaced by the literal text ``raw``."""
    import copy

    doc = copy.deepcopy(doc)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = MARK
    text = json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc, sort_keys=False)
    if suffix != ".json" and "e" in raw:  # YAML 1.1 reads 1e308 as text; 1.0e+308 is its float
        mantissa, exponent = raw.split("e")
        raw = f"{mantissa if '.' in mantissa else mantissa + '.0'}e{'' if exponent[0] in '+-' else '+'}{exponent}"
    return text.replace(f'"{MARK}"', raw).replace(MARK, raw)


def _run(args: list[str], file: Path) -> None:
    """Run ``args`` (``{}`` is ``file``): a bad input must fail with an Error line, nothing written."""
    res = _check([str(file) if a == "{}" else a for a in args])
    assert res.exit_code in (1, 2), f"exit {res.exit_code} for a bad {file.name}: {res.output[-300:]}"


@FUZZ
@given(kind=st.sampled_from(["scenario", "plan", "baseline", "prices", "config", "profile"]), data=st.data(),
       suffix=st.sampled_from([".json", ".yaml"]), raw=EDGE_NUMBER_TEXT)  # fmt: skip
def test_numbers_past_the_edge_in_every_document(tmp_path_factory, kind, data, suffix, raw):
    """A number of thousands of digits or near 1e308 anywhere in a document: refused, never converted."""
    folder = tmp_path_factory.mktemp("edge")
    doc, args = _documents(folder, suffix)[kind]
    suffix = ".json" if kind == "config" else suffix
    path = data.draw(st.sampled_from(_numeric_paths(doc)))
    file = folder / f"{kind}{suffix}"
    file.write_text(_text_with(doc, path, raw, suffix), encoding="utf-8")
    _run(args, file)


@FUZZ
@given(kind=st.sampled_from(["scenario", "plan", "baseline", "prices", "config", "profile"]),
       depth=st.sampled_from([65, 1000, 100_000]), shape=st.sampled_from(["list", "map"]),
       suffix=st.sampled_from([".json", ".yaml"]))  # fmt: skip
@pytest.mark.slow
def test_deep_documents(tmp_path_factory, kind, depth, shape, suffix):
    """A document nesting 65 to 100,000 levels (RecursionError in json.loads before): refused."""
    folder = tmp_path_factory.mktemp("deep")
    _, args = _documents(folder, suffix)[kind]
    suffix = ".json" if kind == "config" else suffix
    inner = "[" * depth + "]" * depth if shape == "list" else '{"a": ' * depth + "1" + "}" * depth
    file = folder / f"{kind}{suffix}"
    file.write_text('{"x": ' + inner + "}", encoding="utf-8")  # JSON is YAML too
    _run(args, file)


@FUZZ
@given(kind=st.sampled_from(["scenario", "plan", "baseline", "prices", "profile"]),
       key=st.sampled_from(["? [a, b]\n: 1\n", "? {a: 1}\n: 1\n", "? [[1], {b: 2}]\n: x\n",
                            "? !!set {a}\n: 1\n"]))  # fmt: skip
def test_yaml_keys_that_are_lists_or_maps(tmp_path_factory, kind, key):
    """A YAML key that is a list or map (``unhashable type`` before): refused."""
    folder = tmp_path_factory.mktemp("keys")
    doc, args = _documents(folder, ".yaml")[kind]
    file = folder / f"{kind}.yaml"
    file.write_text(yaml.safe_dump(doc, sort_keys=False) + key, encoding="utf-8")
    _run(args, file)


def _special_commands(folder: Path, write: bool = True) -> dict[str, list[str]]:
    scenario = folder / "s.yaml"
    if write:
        scenario.write_text(yaml.safe_dump({**SCENARIO_DOC, "workload": {"path": str(TRACE)}}), encoding="utf-8")
    return {
        "estimate --points": ["estimate", "--points", "{}"],
        "estimate --model (config.json)": ["estimate", "--model", "{}", "--gpu", "H100"],
        "estimate --profile": ["estimate", "--model", "Llama-3-8B", "--gpu", "H100", "--profile", "{}"],
        "plan (scenario)": ["plan", "{}", "--no-analysis"],
        "plan --prices": ["plan", "--model", "Llama-3-8B", "--synthetic", "balanced", "--rate", "2", "--prices", "{}"],
        "plan --workload": ["plan", "--model", "Llama-3-8B", "--workload", "{}", "--gpus", "H100", "--goodput", "1"],
        "simulate (plan)": ["simulate", "{}", "--trace", str(TRACE)],
        "simulate --trace": ["simulate", str(PLAN), "--trace", "{}"],
        "report (plan)": ["report", "{}"],
        "report --baseline": ["report", str(PLAN), "--baseline", "{}"],
        "gate --baseline": ["gate", str(scenario), "--baseline", "{}"],
        "autoscale --load-curve": ["autoscale", str(scenario), "--load-curve", "{}"],
        "profile merge": ["profile", "merge", "{}", "--out", str(folder / "cat")],
        "emit (plan)": ["emit", "{}", "--out", str(folder / "deploy"), "--target", "vllm"],
    }  # fmt: skip


@FUZZ
@given(command=st.sampled_from(sorted(_special_commands(Path("."), write=False))),
       special=st.sampled_from(["fifo", "/dev/zero", "folder"]))  # fmt: skip
def test_special_files_on_every_input_path(tmp_path_factory, command, special):
    """A FIFO blocked ``estimate --points`` forever and /dev/zero read until memory ran out: every input path
    refuses a file that is not regular. A watchdog opens the FIFO's other end after 20 s, so a regression fails
    the time check instead of hanging the suite."""
    folder = tmp_path_factory.mktemp("special")
    args = _special_commands(folder)[command]
    if special == "fifo":
        target = folder / "input.json"
        os.mkfifo(target)
    elif special == "folder":
        target = folder / "input.yaml"
        target.mkdir()
    else:
        target = Path(special)
    done = threading.Event()

    def unblock() -> None:
        if not done.wait(20) and special == "fifo":
            try:
                fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
            except OSError:
                pass

    watchdog = threading.Thread(target=unblock, daemon=True)
    watchdog.start()
    try:
        res = _check([str(target) if a == "{}" else a for a in args])
    finally:
        done.set()
    assert res.exit_code in (1, 2), res.output[-300:]


POINTS_HEADER = ["model", "gpu", "concurrency", "isl", "osl"]
POINTS_ROW = ["Llama-3-8B", "H100", "8", "128", "128"]


@FUZZ
@given(twice=st.sampled_from(POINTS_HEADER), extra=st.integers(min_value=0, max_value=3),
       rows=st.integers(min_value=1, max_value=4), mode=st.sampled_from(["duplicate", "extra", "short"]))  # fmt: skip
def test_points_and_traces_with_a_column_named_twice_or_extra_cells(tmp_path_factory, twice, extra, rows, mode):
    """A column named twice silently took the last value and extra cells were dropped: both are errors."""
    folder = tmp_path_factory.mktemp("csv")
    header, row = list(POINTS_HEADER), list(POINTS_ROW)
    if mode == "duplicate":
        header.append(twice)
        row.append(row[POINTS_HEADER.index(twice)])
    body = [",".join(row)] * rows
    bad = rows - 1  # the last row is the odd one
    if mode == "extra":
        body[bad] += "," * (extra + 1) + "5"
    elif mode == "short":
        body[bad] = ",".join(row[: max(1, len(row) - 1 - extra)])
    points = folder / "p.csv"
    points.write_text("\n".join([",".join(header), *body]) + "\n", encoding="utf-8")
    _run(["estimate", "--points", "{}", "--json"], points)
    if mode == "short":
        return  # a short Azure row leaves a blank the column checks report (tested in tests/unit)
    azure = ["2023-11-16 18:15:46", "374", "44"]
    head = ["TIMESTAMP", "ContextTokens", "GeneratedTokens"] + (["ContextTokens"] if mode == "duplicate" else [])
    lines = [",".join(azure + (["5"] if mode == "duplicate" else []))] * rows
    if mode == "extra":
        lines[bad] += "," * (extra + 1) + "5"
    trace = folder / "t.csv"
    trace.write_text("\n".join([",".join(head), *lines]) + "\n", encoding="utf-8")
    _run(["simulate", str(PLAN), "--trace", "{}"], trace)
    _run(["plan", "--model", "Llama-3-8B", "--workload", "{}", "--gpus", "H100", "--goodput", "1", "--no-analysis"],
         trace)  # fmt: skip


@FUZZ
@given(years=st.integers(min_value=101, max_value=580), fmt=st.sampled_from(["azure", "mooncake"]))
def test_timestamps_more_than_a_century_apart(tmp_path_factory, years, fmt):
    """Timestamps centuries apart overflowed int64 nanoseconds (a garbage span, exit 0): refused."""
    folder = tmp_path_factory.mktemp("years")
    if fmt == "azure":
        first = 1680 + (580 - years) // 2
        trace = folder / "t.csv"
        trace.write_text(f"TIMESTAMP,ContextTokens,GeneratedTokens\n{first}-01-01 00:00:00,100,10\n"
                         f"{first + years}-06-01 00:00:00,100,10\n", encoding="utf-8")  # fmt: skip
    else:
        trace = folder / "t.jsonl"
        ms = years * 365.25 * 86400 * 1e3
        rows = [{"timestamp": 0, "input_length": 100, "output_length": 10},
                {"timestamp": ms, "input_length": 100, "output_length": 10}]  # fmt: skip
        trace.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _run(["simulate", str(PLAN), "--trace", "{}"], trace)


SHARE_PARSERS = {
    "--percentile": lambda t: __import__("hetplan.units", fromlist=["x"]).parse_percentile(t, "--percentile"),
    "--target": lambda t: __import__("hetplan.cli.simulate", fromlist=["x"]).parse_share(t, "--target"),
    "--quantile": lambda t: __import__("hetplan.cli.simulate", fromlist=["x"]).parse_share(t, "--quantile", True),
    "--hysteresis": lambda t: __import__("hetplan.units", fromlist=["x"]).parse_share(
        t, "--hysteresis", 0.0, 1.0, False, True, "10"
    ),
}


@given(flag=st.sampled_from(sorted(SHARE_PARSERS)),
       number=st.floats(min_value=0, max_value=1e4, allow_nan=False).map(lambda x: round(x, 4)))  # fmt: skip
def test_no_share_reads_two_ways(flag, number):
    """One percent rule: a bare number is a fraction, a percent carries its sign. Whatever the value, the bare
    text and the text with ``%`` never give the same share unless the number is 0, and a bare number above 1 is
    refused (``--quantile 1.5`` meant 1.5 % while ``1`` meant 100 %)."""
    parse = SHARE_PARSERS[flag]

    def read(text: str) -> float | None:
        try:
            return parse(text)
        except InputError:
            return None

    bare, percent = read(f"{number:g}"), read(f"{number:g}%")
    if number > 1:
        assert bare is None
    if bare is not None:
        assert bare == pytest.approx(number)
    if percent is not None:
        assert percent == pytest.approx(number / 100)
    if number > 0 and bare is not None and percent is not None:
        assert bare != percent
