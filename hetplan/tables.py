"""Tables that keep every number whole on a narrow terminal (issue 31: ``COLUMNS=80`` never cuts a number)."""

from __future__ import annotations

import re

from rich.console import Console
from rich.table import Column, Table

#: A table cell that is a number: digits with separators, an optional sign, currency, approximation or comparison
#: mark, an optional unit or suffix (``1,234``, ``12.5 ms``, ``$98.32``, ``~3.2?``, ``91.2%``, ``8/128``,
#: ``2.1x``, ``39k``), or ``-`` for a missing value.
_NUMBER_CELL = re.compile(
    r"^\s*[~<>≈+$-]*\$?\d[\d.,/]*(e[+-]?\d+)?\s*"
    r"(%|[kKMGB]|ms|s|us|µs|x|h|/h|GiB|GB|GB/s|tokens|tok/s|req/s|\(fp16\)|\?)?\s*$"
)


def _plain(cell: object) -> str | None:
    from rich.text import Text

    if isinstance(cell, str):
        return Text.from_markup(cell).plain if "[" in cell else cell
    if isinstance(cell, Text):
        return cell.plain
    return None


def _header_lines(header: str, width: int) -> list[str]:
    """A numeric column's header one word a line, and a word wider than the column's cells also broken after its
    slashes (``tok/s/user`` over 4-character cells: ``tok/``, ``s/``, ``user``), so the header does not widen the
    column past its numbers and push a label column into folding mid-word (``P1xTP4+D1xTP`` / ``4``)."""
    lines: list[str] = []
    for word in header.split():
        pieces = re.findall(r"[^/]*/|[^/]+", word)
        target = max(width, *(len(p) for p in pieces))
        line = ""
        for piece in pieces:
            if line and len(line) + len(piece) > target:
                lines.append(line)
                line = ""
            line += piece
        lines.append(line)
    return lines


def _label_widths(table: Table, con: Console, numeric: list[Column]) -> None:
    """Give each label column of ``table`` a fixed width of at least its longest word when the numbers and the
    labels' longest words fit ``con`` together: rich narrows the widest wrappable columns first, whatever their
    words, and folded ``H100-SXM`` into ``H100-SX`` / ``M`` beside room to spare. The room left goes first to the
    labels that need least to fit on one line, then evenly. Left to rich when even the words do not fit."""
    labels = [c for c in table.columns if c not in numeric and c.width is None]
    fixed = [c for c in table.columns if c not in labels]
    lines: list[list[str]] = []
    for column in labels:
        texts = [_plain(x) for x in (column.header, *column.cells)]
        if any(t is None for t in texts):
            return  # a cell that is not text: rich measures it
        lines.append([line for t in texts for line in (t or "").splitlines()])
    if not labels:
        return
    shortest = [max([len(w) for line in ls for w in line.split()] or [1]) for ls in lines]
    longest = [max([len(line) for line in ls] or [1]) for ls in lines]
    used = table._extra_width + sum(table._get_padding_width(i) for i in range(len(table.columns)))
    for column in fixed:
        header = _plain(column.header) or ""
        used += column.width or max([column.min_width or 0, *(len(line) for line in header.splitlines())])
    room = con.width - used - sum(shortest)
    want = sum(b - a for a, b in zip(shortest, longest, strict=True))
    if room < 0 or room >= want:
        return  # the words do not fit anyway, or nothing needs to wrap
    # water-filling: a label that needs little more than its longest word gets its whole line (a key column,
    # "traffic left out"), the others share what is left evenly
    order = sorted(range(len(labels)), key=lambda i: longest[i] - shortest[i])
    for n, i in enumerate(order):
        give = min(longest[i] - shortest[i], room // (len(order) - n))
        labels[i].width = shortest[i] + give
        room -= give


def fit_numbers(table: Table, console: Console | None = None) -> Table:
    """Keep every number of ``table`` whole on a narrow terminal (e.g. ``COLUMNS=80``); returns ``table``.

    When the table is wider than ``console`` (default: a new :class:`Console`, which reads ``COLUMNS``), a column
    whose cells are all numbers (``1,234``, ``12.5 ms``, ``$98.32``; ``-`` for none) never wraps and is as wide as its
    longest cell, its header's words go on separate lines, and every other column folds its text onto more lines
    instead of cutting it with an ellipsis: rich narrows the wrappable columns first, so the labels wrap and the
    numbers stay whole as long as the numeric columns alone fit. When a label would still fold inside a word, a
    numeric header word wider than its cells is also broken after its slashes (:func:`_header_lines`). A table
    that fits is left as it is (the same output on a wide terminal)."""
    from rich.measure import Measurement
    from rich.text import Text

    con = console or Console()
    if Measurement.get(con, con.options.update(max_width=100_000), table).maximum <= con.width:
        return table
    numeric = []
    for column in table.columns:
        cells = [_plain(c) for c in column.cells]
        if cells and all(c is not None and (c.strip() in ("", "-") or _NUMBER_CELL.match(c)) for c in cells):
            column.no_wrap = True
            column.overflow = "fold"
            column.min_width = max([column.min_width or 0, *(len(c or "") for c in cells)])
            header = _plain(column.header)
            numeric.append((column, header))
            if header and " " in header.strip():
                column.header = Text("\n".join(header.split()))
        else:
            column.no_wrap = False
            column.overflow = "fold"
    _label_widths(table, con, [c for c, _ in numeric])
    if Measurement.get(con, con.options.update(max_width=100_000), table).minimum > con.width:
        # a label column would still fold inside a word: break the numeric headers after their slashes too
        for column, header in numeric:
            if header and len(header) > (column.min_width or 0):
                column.header = Text("\n".join(_header_lines(header, column.min_width or 0)))
    return table
