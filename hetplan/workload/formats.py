"""The trace file formats, one parser each: Azure CSV, Mooncake JSONL (with its prompt-block hashes) and
length-only CSV, each read into a :class:`~hetplan.workload.model.Workload` with its attribution. Format detection,
the planner's and the simulator's entry points: :mod:`hetplan.workload.readers`.

Source: formats from the public traces (Azure LLM inference trace 2023, Patel et al., Splitwise, ISCA 2024,
CC-BY-4.0; Mooncake trace, kvcache-ai/Mooncake, FAST'25, Apache-2.0).
"""

from __future__ import annotations

import warnings
from array import array
from pathlib import Path

import numpy as np
import pandas as pd

from hetplan.errors import InputError
from hetplan.input_checks import MAX_SPAN_S, load_json
from hetplan.workload.model import Workload, make_workload
from hetplan.workload.prefix import MOONCAKE_BLOCK_TOKENS, BlockHashes

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
        with open(path, encoding="utf-8-sig", newline="") as fh:
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
    check_span(path, (times.max().value - start.value) / 1e9)  # int ns, exact: no int64 overflow in the check
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


def check_span(what: object, span_s: float) -> None:
    """Refuse timestamps more than a century apart (:data:`hetplan.input_checks.MAX_SPAN_S`): a date or unit error, and
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
        with open(path, encoding="utf-8-sig") as fh:  # a byte-order mark is not part of the first record
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
