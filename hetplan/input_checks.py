"""The edge every input crosses: the numeric rule (finite, at most :data:`MAX_NUMBER`), documents checked for
size, nesting, aliases and numbers, and files checked to be regular before they are read. Writing lives in
:mod:`hetplan.io`.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import json
import math
import re
import stat
from pathlib import Path
from typing import Any

from hetplan.errors import InputError

#: Largest YAML/JSON document hetplan reads (scenario, plan, schedule, profile, price, pool, grid files): hetplan
#: writes plans of tens of kB; anything near this is a wrong file (a trace passed as a plan, say).
MAX_DOCUMENT_BYTES = 64 * 2**20
#: Deepest nesting of lists and maps accepted in a document (hetplan's own files nest 6 levels).
MAX_DOCUMENT_DEPTH = 64
#: Largest magnitude of any number hetplan reads (from a file, a table cell or a flag), before any field's own bound:
#: 1e15 is above every figure hetplan uses (bytes of a GPU's memory are ~1e11, token counts at most 1e7, prices
#: ~1e3) and small enough that products of a few such numbers stay finite floats and exact int64 sums. Integers
#: with thousands of digits, 1e308 and inf/NaN are refused by :func:`check_number` before any arithmetic.
MAX_NUMBER = 1e15
#: Longest span of timestamps in one trace, seconds (a century): more is a unit or date error (1970 vs 2070), and
#: nanosecond clocks (pandas, int64) overflow at about 292 years.
MAX_SPAN_S = 100 * 365.25 * 86400.0


#: Text that a schema would read as a number (pydantic's lax mode turns "1e308" and "nan" into floats): such text
#: in any field is held to the numeric rule too.
_NUMBER_TEXT = re.compile(r"^\s*[-+]?((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|inf(inity)?|nan)\s*$", re.IGNORECASE)


def check_number(value: Any, what: str, fix: str = "give a finite number of sensible size") -> float | int:
    """``value`` (an int or float, not a bool) if it is finite and at most :data:`MAX_NUMBER` in magnitude: the one
    numeric edge every file, table cell and flag goes through before arithmetic. Ints are compared without
    converting them (a 5,000-digit int cannot overflow the check).

    Raises:
        InputError: not finite (inf, NaN) or too large; the message names ``what``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{what}: {value!r} is not a number", fix=fix)
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"{what} is {value}, not a finite number", fix=fix)
    if (-MAX_NUMBER <= value <= MAX_NUMBER) is False:
        shown = f"{value:.3g}" if isinstance(value, float) else _short_int(value)
        raise InputError(
            f"{what} is {shown}, beyond the {MAX_NUMBER:g} hetplan accepts for any number",
            "no figure hetplan uses comes near it: probably a wrong unit or a corrupt value",
            fix,
        )
    return value


def _short_int(value: int) -> str:
    """A huge int for a message: its sign, first digits and digit count (str() of 5,000 digits is refused)."""
    digits = len(format(abs(value), "x")) * 1.204  # hex digits x log10(16): no decimal conversion of the whole int
    return f"{'-' if value < 0 else ''}an integer of about {digits:,.0f} digits"


def parse_number(text: str, what: str, fix: str = "give a finite number of sensible size") -> float:
    """A number read from text (a table cell, a flag) under :func:`check_number`'s rule: ASCII digits only, finite,
    at most :data:`MAX_NUMBER` in magnitude; the text is refused before conversion when it is longer than any such
    number can be written.

    Raises:
        InputError: not a number, or outside the rule; the message names ``what``.
    """
    raw = str(text).strip()
    if len(raw) > 64 or not raw.isascii():
        raise InputError(f"{what}: {raw[:24]!r}{'...' if len(raw) > 24 else ''} is not a number", fix=fix)
    try:
        number = float(raw)
    except ValueError:
        raise InputError(f"{what}: {raw!r} is not a number", fix=fix) from None
    return float(check_number(number, what, fix))


def json_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in JSON ``text`` (brackets inside strings ignored), found without
    parsing: ``json.loads`` recurses once per level and a 100,000-deep file raises ``RecursionError``. Linear in
    the text (numpy)."""
    import numpy as np

    if text.count("[") + text.count("{") <= 1:  # a JSON line of a trace: no need to scan
        return min(1, text.count("[") + text.count("{"))
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)  # strings out: a "[" inside one is text
    raw = np.frombuffer(bare.encode("utf-8", "replace"), dtype=np.uint8)
    step = (raw == ord("[")).astype(np.int64) + (raw == ord("{")) - (raw == ord("]")) - (raw == ord("}"))
    return int(np.cumsum(step).max()) if step.size else 0


def load_json(text: str, what: str, error: type[InputError] = InputError, max_depth: int = MAX_DOCUMENT_DEPTH) -> Any:
    """Parse JSON ``text`` the one way hetplan reads JSON files: nesting checked before parsing (no
    ``RecursionError``), duplicate keys and NaN/Infinity refused, then :func:`check_document` (numbers finite and at
    most :data:`MAX_NUMBER`, depth). ``what`` names the file in messages; ``error`` is the error class raised.

    Raises:
        InputError (or ``error``): invalid JSON (with line and column), too deep, a duplicate key, a non-finite
            constant or a number beyond the rule.
    """

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a number JSON allows")

    if json_depth(text) > max_depth:
        raise error(
            f"{what} nests lists or maps more than {max_depth} levels deep",
            "no hetplan file needs more than a few levels",
            "check the file's structure",
        )
    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise error(
            f"{what} is not valid JSON at line {exc.lineno}, column {exc.colno}", exc.msg, "fix the syntax"
        ) from None
    except (ValueError, RecursionError) as exc:  # a duplicate key, NaN, an int of more than 4,300 digits
        raise error(
            f"{what} is not valid JSON", str(exc).splitlines()[0] if str(exc) else type(exc).__name__, "fix it"
        ) from None
    try:
        check_document(data, what)
    except InputError as exc:
        raise error(exc.what, exc.why, exc.fix) from None
    return data


def check_input_file(path: str | Path, what: str, max_bytes: int | None = None) -> Path:
    """``path`` if it is a regular file hetplan may read: never a folder, device, FIFO or socket (reading
    ``/dev/zero`` would never end), and at most ``max_bytes`` bytes when given.

    Raises:
        InputError: missing, not a regular file, or larger than ``max_bytes`` (the message names ``what``).
    """
    target = Path(str(path))
    try:
        st = target.stat()
    except OSError as exc:
        raise InputError(f"cannot read {what} {target}", str(exc), "check the path") from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError(f"{what} {target} is a folder, not a file", fix="pass the file itself")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{what} {target} is not a regular file (a device, pipe or socket)",
            "hetplan reads files it can size before reading",
            "write the content to a file and pass that",
        )
    if max_bytes is not None and st.st_size > max_bytes:
        raise InputError(
            f"{what} {target} is {st.st_size / 2**20:,.1f} MiB, more than the {max_bytes / 2**20:g} MiB hetplan reads",
            "files of this kind are a few kB to a few MB; this is probably another file",
            "check the path",
        )
    return target


def read_text_input(path: str | Path, what: str, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The UTF-8 text of a document ``path`` (checked by :func:`check_input_file` first), without a leading
    byte-order mark (a JSON parser refuses one, and a CSV header would name its first column ``\ufeffmodel``).

    Raises:
        InputError: as :func:`check_input_file`, unreadable, or not UTF-8.
    """
    target = check_input_file(path, what, max_bytes)
    try:
        return target.read_text(encoding="utf-8-sig")  # a byte-order mark (Excel, Notepad) is not text
    except OSError as exc:
        raise InputError(f"cannot read {what} {target}", str(exc), "check the path") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {target} is not UTF-8 text", fix="pass a YAML or JSON text file") from None


def check_document(data: Any, what: str, max_depth: int = MAX_DOCUMENT_DEPTH) -> None:
    """Refuse a parsed document that shares a list or map between places (YAML anchors and aliases, which can
    expand a 400-byte file into billions of values) or nests deeper than ``max_depth``; only map keys that are
    text, numbers or booleans are accepted, and every number (value or key, or text a schema would read as a
    number, ``"1e308"``) must pass :func:`check_number` (finite, at most :data:`MAX_NUMBER`). Linear in the
    document's size; a refused number is named by its path (``gpus[3].hbm_gib``), found by a second walk.

    Raises:
        InputError: an alias, a too-deep nesting, a key that is a list or map, or a number beyond the rule.
    """
    try:
        _walk_document(data, what, max_depth, False)
    except _BadNumber:
        _walk_document(data, what, max_depth, True)  # the same walk, building paths, raises the named error


class _BadNumber(Exception):
    """A number beyond the rule, found by the fast walk (which keeps no paths)."""


def _looks_numeric(text: str) -> bool:
    """Text a lax schema would read as a number (``"1e308"``, ``"nan"``): a cheap first-character test first."""
    return bool(text) and text.lstrip()[:1] in _NUMERIC_START and _NUMBER_TEXT.match(text) is not None


_NUMERIC_START = frozenset("0123456789+-.iInN")


def _walk_document(data: Any, what: str, max_depth: int, paths: bool) -> None:
    """:func:`check_document`'s walk; without ``paths`` a bad number raises :class:`_BadNumber` (no message)."""

    def number(value: Any, where: str, fix: str) -> None:
        if not paths:
            if isinstance(value, float) and not math.isfinite(value) or not -MAX_NUMBER <= value <= MAX_NUMBER:
                raise _BadNumber
            return
        check_number(value, f"{what}: {where or 'the document'}", fix)

    seen: set[int] = set()
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    while stack:
        node, depth, where = stack.pop()
        if isinstance(node, int | float) and not isinstance(node, bool):
            number(node, where, "fix the value (hetplan's files hold plain sizes)")
            continue
        if isinstance(node, str):
            if _looks_numeric(node):  # "1e308" is text in YAML 1.1, and a float to pydantic's lax mode
                number(float(node), where, "fix the value")
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > max_depth:
            raise InputError(
                f"{what} nests lists or maps more than {max_depth} levels deep",
                "no hetplan file needs more than a few levels",
                "check the file's structure",
            )
        if id(node) in seen:
            raise InputError(
                f"{what} uses YAML anchors and aliases (&name / *name)",
                "hetplan does not accept them in input files: a few aliases can expand into billions of values",
                "write the repeated values out",
            )
        seen.add(id(node))
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str | int | float | bool) and key is not None:
                    raise InputError(f"{what} has a map key that is a {type(key).__name__}", fix="use text keys")
                if isinstance(key, int | float) and not isinstance(key, bool):
                    number(key, f"the key at {where or 'the top'}", "use text keys")
                stack.append((value, depth + 1, (f"{where}.{key}" if where else str(key)) if paths else ""))
        elif paths:
            stack.extend((value, depth + 1, f"{where}[{n}]") for n, value in enumerate(node))
        else:
            stack.extend((value, depth + 1, "") for value in node)
