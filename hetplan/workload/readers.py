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

Format detection (:func:`trace_format`) is by extension and header; the simulator also reads a file whose
content starts with ``{`` as JSON lines and matches extensions in any case, the planner matches them as written.
ServeGen per-window files are load curves, not request traces: :mod:`hetplan.autoscale.curves` reads them.

Source: formats from the public traces; mixing traces into one stream is hetplan's own reconstruction (the mixed
conversation + code stream follows CASCADE's evaluation set-up).
"""

from __future__ import annotations

import warnings
from array import array
from pathlib import Path

import numpy as np
import pandas as pd

from hetplan.errors import InputError
from hetplan.io import MAX_SPAN_S, check_input_file, load_json
from hetplan.workload.model import RequestStream, Workload, make_stream, make_workload
from hetplan.workload.prefix import MOONCAKE_BLOCK_TOKENS, BlockHashes, concat_block_hashes

AZURE_ATTRIBUTION = "Azure LLM inference trace 2023 (Patel et al., Splitwise, ISCA 2024), CC-BY-4.0"
MOONCAKE_ATTRIBUTION = "Mooncake trace (kvcache-ai/Mooncake, FAST'25), Apache-2.0"


def _read_csv(path: Path) -> pd.DataFrame:
    """A CSV trace as read by pandas, with the header's names each given once and every row no wider than the
    header (pandas would rename a repeated column ``X.1`` and let one value silently win, and turn a row's extra
    cell into an index or drop it). A short row leaves blanks, which the column checks report.

    Raises:
        InputError: unreadable, a column named twice, or a row with more cells than the header.
    """
    import csv

    try:
        with open(path, encoding="utf-8", newline="") as fh:
            header = [h.strip() for h in next(csv.reader([fh.readline()]), [])]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(
            f"cannot read workload {path}", str(exc).splitlines()[0], "check the path and format"
        ) from None
    twice = sorted({h for h in header if h and header.count(h) > 1})
    if twice:
        raise InputError(
            f"workload {path} names the column(s) {', '.join(twice)} more than once",
            "one of the values would silently win",
            "keep one column of each name",
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", pd.errors.ParserWarning)  # a row wider than the header
            return pd.read_csv(path, index_col=False, on_bad_lines="error")
    except pd.errors.ParserWarning:
        raise InputError(
            f"workload {path} has a row with more cells than its header ({len(header)} columns)",
            "the extra cells would be dropped",
            "give every row one cell per column (quote cells that hold commas)",
        ) from None
    except pd.errors.ParserError as exc:
        raise InputError(
            f"workload {path} has a row with more cells than its header ({len(header)} columns)"
            if "Expected" in str(exc) else f"cannot read workload {path}",
            str(exc).strip().splitlines()[0],
            "give every row one cell per column (quote cells that hold commas)",
        ) from None  # fmt: skip
    except (OSError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read workload {path}", str(exc).splitlines()[0], "check the path and format"
        ) from None


def read_azure_csv(path: Path, rate_per_s: float | None = None, display: str | None = None) -> Workload:
    """Read an Azure LLM inference trace CSV (``TIMESTAMP, ContextTokens, GeneratedTokens``).

    ``display`` is the name recorded as the workload's source (default: the path)."""
    df = _read_csv(path)
    missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(df.columns)
    if missing:
        raise InputError(
            f"{path} is not an Azure trace: missing columns {sorted(missing)}",
            fix="pass a CSV with TIMESTAMP, ContextTokens, GeneratedTokens",
        )
    if pd.api.types.is_numeric_dtype(df["TIMESTAMP"]):
        raise InputError(
            f"{path}: TIMESTAMP holds numbers, not date-times",
            "the Azure format has timestamps like '2023-11-16 18:15:46.6805900'",
            "convert the timestamps, or use a Mooncake JSONL (timestamp in ms) for numeric times",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas warns while inferring the format; bad rows are reported below
        try:
            times = pd.to_datetime(df["TIMESTAMP"], errors="coerce", format="mixed")
        except (ValueError, TypeError, OverflowError) as exc:  # pandas: "Mixed timezones detected", out of range
            raise InputError(
                f"{path}: TIMESTAMP mixes time zones (or zoned and unzoned times)",
                str(exc).splitlines()[0],
                "write every timestamp in one zone, e.g. all UTC ('2023-11-16 18:15:46.68+00:00')",
            ) from None
    if times.isna().any():
        row = int(np.nonzero(times.isna().to_numpy())[0][0])
        raise InputError(
            f"{path}: TIMESTAMP in row {row + 1} is not a date-time ({df['TIMESTAMP'].iloc[row]!r})",
            f"{int(times.isna().sum())} row(s) affected",
            "timestamps look like '2023-11-16 18:15:46.68'",
        )
    start = times.min()
    _check_span(path, (times.max().value - start.value) / 1e9)  # int ns, exact: no int64 overflow in the check
    return make_workload(
        path.stem,
        display or str(path),
        AZURE_ATTRIBUTION,
        (times - start).dt.total_seconds().to_numpy(),
        df["ContextTokens"].to_numpy(),
        df["GeneratedTokens"].to_numpy(),
        rate_per_s,
        "ContextTokens",
        "GeneratedTokens",
        float(start.value) / 1e9,
    )


def _check_span(what: object, span_s: float) -> None:
    """Refuse timestamps more than a century apart (:data:`hetplan.io.MAX_SPAN_S`): a date or unit error, and
    past about 292 years nanosecond clocks overflow int64.

    Raises:
        InputError: naming ``what`` and the span in years.
    """
    if span_s > MAX_SPAN_S:
        raise InputError(
            f"timestamps of {what} span {span_s / (365.25 * 86400):,.0f} years, more than the century hetplan accepts",
            "a trace covers hours to months; this is a date or unit error",
            "check the timestamps (Azure: date-times; Mooncake: milliseconds)",
        )


def read_mooncake_jsonl(path: Path, rate_per_s: float | None = None, display: str | None = None) -> Workload:
    """Read a Mooncake JSONL trace (``timestamp`` ms, ``input_length``, ``output_length``, optional ``hash_ids``).

    ``hash_ids`` (a list of whole numbers per record, one per 512-token prompt block) are kept as the workload's
    ``prefix_blocks`` when every record has them; a trace where some records have them and others not is refused.

    Raises:
        InputError: unreadable, a record without the fields, ``hash_ids`` not a list of whole numbers in int64
            range or longer than the prompt's blocks, or ``hash_ids`` on some records only.
    """
    times, prompt, output = [], [], []
    flat = array("q")  # every record's hash_ids, packed as they are read (no list per request is kept)
    ends = array("q")
    with_ids = 0
    fix = "each line needs timestamp (ms), input_length, output_length (and hash_ids: a list of block ids, or none)"
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:  # depth, duplicate keys and numbers (finite, at most 1e15) as every JSON file
                    row = load_json(line, f"{path}:{lineno}")
                    times.append(float(row["timestamp"]) / 1e3)
                    prompt.append(row["input_length"])
                    output.append(row["output_length"])
                    ids = row.get("hash_ids")
                    if ids is not None:
                        _check_hash_ids(ids, row["input_length"])
                        with_ids += 1
                        flat.extend(ids)
                        ends.append(len(flat))
                    if with_ids not in (0, len(prompt)):
                        raise ValueError("hash_ids on some records only (every record or none must have them)")
                except InputError as exc:
                    problem = exc.what.removeprefix(f"{path}:{lineno}").lstrip(": ")
                    raise InputError(
                        f"{path}:{lineno} is not a Mooncake record ({problem}{': ' + exc.why if exc.why else ''})",
                        fix=fix,
                    ) from None
                except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
                    raise InputError(
                        f"{path}:{lineno} is not a Mooncake record ({type(exc).__name__}: {exc})", fix=fix
                    ) from None
    except OSError as exc:
        raise InputError(f"cannot read workload {path}", str(exc), "check the path") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"workload {path} is not UTF-8 text", str(exc), "pass a JSONL text file") from None
    return make_workload(
        path.stem,
        display or str(path),
        MOONCAKE_ATTRIBUTION,
        np.array(times, dtype=float),
        prompt,
        output,
        rate_per_s,
        "input_length",
        "output_length",
        prefix_blocks=_packed(flat, ends) if with_ids and with_ids == len(prompt) else None,
    )


def _packed(flat: array[int], ends: array[int]) -> BlockHashes:
    """:class:`BlockHashes` (512-token blocks) from the ids read one after the other and each record's end."""
    offsets = np.zeros(len(ends) + 1, dtype=np.int64)
    offsets[1:] = np.frombuffer(ends, dtype=np.int64)
    return BlockHashes(np.frombuffer(flat, dtype=np.int64).copy(), offsets, MOONCAKE_BLOCK_TOKENS)


def _check_hash_ids(ids: object, prompt: object) -> None:
    """``hash_ids`` of one record: a list of whole numbers within int64, no more than the prompt's 512-token blocks.

    Raises:
        ValueError: naming the problem."""
    if not isinstance(ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in ids):
        raise ValueError("hash_ids must be a list of whole numbers")
    if any(not -(2**63) <= h < 2**63 for h in ids):
        raise ValueError("hash_ids out of the int64 range")
    if isinstance(prompt, int) and not isinstance(prompt, bool) and len(ids) > -(-prompt // MOONCAKE_BLOCK_TOKENS):
        raise ValueError(
            f"{len(ids)} hash_ids for a prompt of {prompt} tokens (at most one per {MOONCAKE_BLOCK_TOKENS} tokens)"
        )


def read_length_csv(path: Path, rate_per_s: float | None = None, display: str | None = None) -> Workload:
    """Read a length-only CSV (``num_prefill_tokens, num_decode_tokens`` or ``prompt_tokens, output_tokens``).
    The arrival rate comes from ``rate_per_s``; without it the goodput target must be given."""
    df = _read_csv(path)
    for pcol, ocol in (
        ("num_prefill_tokens", "num_decode_tokens"),
        ("prompt_tokens", "output_tokens"),
        ("input_length", "output_length"),
    ):
        if pcol in df.columns and ocol in df.columns:
            return make_workload(
                path.stem, display or str(path), "", None, df[pcol].to_numpy(), df[ocol].to_numpy(), rate_per_s,
                pcol, ocol,
            )  # fmt: skip
    raise InputError(
        f"{path}: no prompt/output length columns",
        f"columns are {list(df.columns)[:6]}",
        "use num_prefill_tokens/num_decode_tokens or prompt_tokens/output_tokens",
    )


_READERS = {"azure": read_azure_csv, "mooncake": read_mooncake_jsonl, "lengths": read_length_csv}


def _first_char(path: Path) -> str:
    with open(path, encoding="utf-8", errors="replace") as fh:
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
        _check_span(
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
    "AZURE_ATTRIBUTION",
    "MOONCAKE_ATTRIBUTION",
    "Workload",
    "load_workload",
    "read_azure_csv",
    "read_length_csv",
    "read_mooncake_jsonl",
    "read_stream",
    "trace_format",
]
