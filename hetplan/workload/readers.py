"""The trace reader, for the planner and the simulator: every trace format is parsed here, once per file.

Formats:

- Azure CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``; Patel et al., Splitwise, ISCA 2024, CC-BY-4.0);
  date-time stamps, so traces keep their real offsets when mixed.
- Mooncake JSONL (``timestamp`` in ms, ``input_length``, ``output_length``, optional ``hash_ids``: one id per
  512-token prompt block, kept as :class:`~hetplan.workload.prefix.BlockHashes` for prefix caching); relative times.
- Length-only CSV (e.g. ShareGPT stats: ``num_prefill_tokens, num_decode_tokens``); no times, the rate must be
  given (the planner only; the simulator replays arrival times).

What each side gets:

- the planner, :func:`load_workload`: a :class:`~hetplan.workload.model.Workload` (mean arrival rate and prompt
  and output length samples; synthetic workloads are in :mod:`hetplan.workload.synthetic`);
- the simulator, :func:`read_stream`: one or more traces mixed into one time-ordered
  :class:`~hetplan.workload.model.RequestStream`, a request's class being its file's stem (e.g.
  ``AzureLLMInferenceTrace_code``) or the value of a CSV column named by ``class_column``.

Each format's parser is in :mod:`hetplan.workload.formats`. Format detection (:func:`trace_format`) is by extension and
header; the simulator also reads a file whose content starts with ``{`` as JSON lines and matches extensions in any
case, the planner matches them as written. ServeGen per-window files are load curves, not request traces:
:mod:`hetplan.autoscale.curves` reads them.

Source: formats from the public traces; mixing traces into one stream is hetplan's own reconstruction (the mixed
conversation + code stream follows CASCADE's evaluation set-up).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from hetplan.errors import InputError
from hetplan.input_checks import check_input_file
from hetplan.workload.formats import (
    check_span,
    read_azure_csv,
    read_length_csv,
    read_mooncake_jsonl,
)
from hetplan.workload.model import RequestStream, Workload, make_stream
from hetplan.workload.prefix import BlockHashes, concat_block_hashes

_READERS = {"azure": read_azure_csv, "mooncake": read_mooncake_jsonl, "lengths": read_length_csv}


def _first_char(path: Path) -> str:
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for line in fh:
            if line.strip():
                return line.strip()[0]
    return ""


def trace_format(path: Path, sniff: bool = False) -> str:
    """``mooncake`` for JSON lines (a ``.jsonl``/``.ndjson`` file), ``azure`` for a CSV whose header names
    ``ContextTokens``, else ``lengths``. ``sniff`` (the simulator's rule): extensions in any case, and a file
    whose content starts with ``{`` is JSON lines too."""
    suffix = path.suffix.lower() if sniff else path.suffix
    if suffix in (".jsonl", ".ndjson") or (sniff and _first_char(path) == "{"):
        return "mooncake"
    with open(path, encoding="utf-8", errors="replace") as fh:
        header = fh.readline()
    return "azure" if "ContextTokens" in header else "lengths"


def load_workload(
    path: str | Path, fmt: str = "auto", rate_per_s: float | None = None, display: str | None = None
) -> Workload:
    """Read a workload file, detecting the format from the extension and header when ``fmt`` is ``auto``.

    Raises:
        InputError: missing file, unknown format or malformed content.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"workload {path} is a folder, not a file", fix="pass the trace file itself")
    if not path.exists():
        raise InputError(f"workload file {path} does not exist", fix="check the --workload path")
    check_input_file(path, "workload file")  # never a device or a pipe (reading /dev/zero would not end)
    if fmt == "auto":
        fmt = trace_format(path)
    if fmt not in _READERS:
        raise InputError(
            f"unknown workload format {fmt!r}", f"known: {', '.join(_READERS)}, synthetic", "set format to one of them"
        )
    return _READERS[fmt](path, rate_per_s, display)


def _class_labels(path: Path, class_column: str, n: int) -> np.ndarray:
    """The ``class_column`` values of a CSV trace, as text (read on their own: every value a string, blanks
    kept, so that e.g. ``007`` stays a class name rather than the number 7)."""
    try:
        raw = pd.read_csv(path, usecols=[class_column], dtype=str, keep_default_na=False)[class_column]
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise InputError(
            f"trace {path} has no column {class_column!r}",
            str(exc).splitlines()[0],
            "name an existing column with --class-column",
        ) from None
    col: np.ndarray = raw.str.strip().to_numpy(dtype=str)
    empty = np.nonzero(col == "")[0]
    if empty.size:
        raise InputError(
            f"trace {path}: --class-column {class_column!r} is empty in data row {int(empty[0]) + 1}",
            f"{empty.size} row(s) have no class",
            f"fill in {class_column!r} for every row, or drop --class-column",
        )
    if col.size != n:
        raise InputError(f"trace {path}: {class_column!r} has {col.size} values for {n} requests", fix="fix the CSV")
    return col


def read_stream(
    paths: list[str | Path], class_column: str | None = None, ttft_slo_s: float = 2.0, tpot_slo_s: float = 0.1
) -> RequestStream:
    """Read one or more traces and mix them into one stream by arrival time.

    Clocks: when every file is an Azure CSV (absolute date-time TIMESTAMPs), the files keep their real offsets
    (the stream starts at the earliest first arrival of all files); otherwise (a Mooncake trace holds relative
    milliseconds) each file's first arrival is at 0. The class is the file stem, or the ``class_column`` value
    (CSV only). The merged order does not depend on the order of ``paths``: requests are sorted by arrival time,
    then class name, then position in their file. A ``.json`` file holding JSON lines is read as Mooncake.

    Raises:
        InputError: a file is missing, a folder, malformed or passed twice; two files share a stem (without
            ``class_column``); a file has no timestamps; ``class_column`` is missing, empty in a row, or given
            for a JSON lines trace.
    """
    if not paths:
        raise InputError("no trace given", fix="pass --trace FILE")
    arrivals, prompts, outputs, labels, starts, formats = [], [], [], [], [], []
    blocks: list[BlockHashes | None] = []
    seen: dict[Path, str] = {}
    stems: dict[str, str] = {}
    for path in map(Path, paths):  # checks that need no parsing come first
        if path.is_dir():
            raise InputError(f"trace {path} is a directory, not a file", fix="pass the trace file itself to --trace")
        if not path.exists():
            raise InputError(f"trace file {path} does not exist", fix="check the --trace path")
        check_input_file(path, "trace file")  # never a device or a pipe
        if class_column and trace_format(path, sniff=True) == "mooncake":
            raise InputError(
                f"--class-column is for CSV traces; {path} holds JSON lines",
                "classes of a JSON lines trace are its file stem",
                "drop --class-column, or convert the trace to CSV",
            )
    for path in map(Path, paths):
        real = path.resolve()
        if real in seen:
            raise InputError(f"trace {path} is given twice", fix="pass each --trace file once")
        seen[real] = str(path)
        if class_column is None and path.stem in stems:
            raise InputError(
                f"traces {stems[path.stem]} and {path} have the same name {path.stem!r}",
                "a request's class is its file's stem, so both files would merge into one class",
                "rename one of the files, or name each request's class with --class-column",
            )
        stems[path.stem] = str(path)
        fmt = trace_format(path, sniff=True)
        wl = load_workload(path, fmt)
        if wl.arrival_s is None:
            raise InputError(
                f"trace {path} has no timestamps",
                "the simulator replays arrival times",
                "pass an Azure CSV or a Mooncake JSONL",
            )
        if fmt == "azure" and path.suffix.lower() == ".json":
            fmt = "auto"  # kept from the simulator's old reader: an Azure CSV named *.json is not an absolute clock
        formats.append(fmt)
        starts.append(wl.clock_start_s if fmt == "azure" and wl.clock_start_s is not None else 0.0)
        arrivals.append(wl.arrival_s)
        blocks.append(wl.prefix_blocks)
        prompts.append(wl.prompt_tokens)
        outputs.append(wl.output_tokens)
        labels.append(_class_labels(path, class_column, wl.n_requests) if class_column else
                      np.full(wl.n_requests, path.stem))  # fmt: skip
    if all(f == "azure" for f in formats):  # absolute clocks: keep the real offsets between files
        t0 = min(starts)
        check_span(
            " + ".join(str(p) for p in paths),
            max(st + float(a.max()) for a, st in zip(arrivals, starts, strict=True)) - t0,
        )
        arrivals = [a + (st - t0) for a, st in zip(arrivals, starts, strict=True)]
    a = np.concatenate(arrivals)
    lab = np.concatenate(labels).astype(str)
    pos = np.concatenate([np.arange(x.size) for x in arrivals])
    order = np.lexsort((pos, lab, a))  # arrival, then class name, then position in its file
    return make_stream(
        a[order],
        np.concatenate(prompts)[order],
        np.concatenate(outputs)[order],
        lab[order],
        ttft_slo_s,
        tpot_slo_s,
        " + ".join(sorted(str(Path(p).name) for p in paths)),
        prefix_blocks=_mixed_blocks(blocks, order),
    )


def _mixed_blocks(blocks: list[BlockHashes | None], order: np.ndarray) -> BlockHashes | None:
    """The files' prefix block ids in the mixed stream's ``order`` (ids of different files never match); None
    unless every file has them."""
    if not blocks or any(b is None for b in blocks):
        return None
    return concat_block_hashes([b for b in blocks if b is not None]).take(order)


__all__ = [
    "Workload",
    "load_workload",
    "read_stream",
    "trace_format",
]
