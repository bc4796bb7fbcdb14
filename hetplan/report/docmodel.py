"""The JSON form of the typed report model: :class:`DocModel`, the base of every report dataclass, writes its fields
in declaration order (``_OMIT_NONE``: fields left out when None; ``_KEYS``: fields whose JSON key is not a Python
name), and :func:`plain` turns nested values into plain JSON data. The report document's key order is the order the
dataclasses declare, so ``hetplan report --format json`` keeps its bytes.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar


def plain(x: Any) -> Any:
    """``x`` as plain JSON data: report dataclasses by :meth:`_Doc.to_doc`, tuples as lists, mappings as dicts."""
    if isinstance(x, DocModel):
        return x.to_doc()
    if isinstance(x, (tuple, list)):
        return [plain(i) for i in x]
    if isinstance(x, Mapping):
        return {k: plain(v) for k, v in x.items()}
    return x


class DocModel:
    """A report value with a JSON form: its dataclass fields in order (see the module docstring)."""

    _OMIT_NONE: ClassVar[frozenset[str]] = frozenset()
    _KEYS: ClassVar[Mapping[str, str]] = {}

    def to_doc(self) -> dict[str, Any]:
        """The JSON form: a dict in the report document's key order."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if f.name in self._OMIT_NONE and value is None:
                continue
            out[self._KEYS.get(f.name, f.name)] = plain(value)
        return out
