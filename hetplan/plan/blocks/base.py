"""The base of every typed plan block: a frozen pydantic model that reads its part of a plan document and writes
it back unchanged, key order included.

A block declares the fields later stages read (attribute access, typed); a key it does not declare (a hand-edited
file, or one a newer hetplan wrote) is kept as written (``extra="allow"``) so a plan file round-trips. Fields are
written only when the document had them (``exclude_unset``), in the order the document had them (the producers'
order for the bundled plans), so :func:`hetplan.plan.doc.to_doc` gives the same bytes back.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidatorFunctionWrapHandler, model_validator

#: A number as the document wrote it: an int stays an int and a float a float, so a plan writes the same bytes back.
Num = int | float

B = TypeVar("B", bound="Block")


class Block(BaseModel):
    """A typed part of a plan document (see the module docstring)."""

    model_config = ConfigDict(extra="allow", frozen=True, populate_by_name=True, allow_inf_nan=True)
    _order: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        made = handler(data)
        if isinstance(data, Mapping) and isinstance(made, Block):  # a field given by name is written by its alias
            fields = cls.model_fields
            made._order = tuple((fields[k].alias or k) if isinstance(k, str) and k in fields else str(k) for k in data)
        return made

    @classmethod
    def from_doc(cls, data: Mapping[str, Any]) -> Self:
        """The block of a document's mapping ``data`` (checked: a declared field of the wrong type raises
        pydantic's ``ValidationError``)."""
        return cls.model_validate(data)

    def to_doc(self) -> dict[str, Any]:
        """The block as document data: the keys it was read with, in their order (fields set since then after
        them, in declaration order; undeclared keys kept as written), nested blocks likewise."""
        fields = type(self).model_fields
        values: dict[str, Any] = {}
        for name in fields:
            if name in self.model_fields_set:
                values[fields[name].alias or name] = _plain(getattr(self, name))
        for key, value in (self.model_extra or {}).items():
            values[key] = _plain(value)
        out = {k: values[k] for k in self._order if k in values}
        out.update({k: v for k, v in values.items() if k not in out})
        return out

    def with_(self, **changes: Any) -> Self:
        """A copy with ``changes`` (field names; each counts as set, so it is written)."""
        made = self.model_copy(update=changes)
        made.__pydantic_fields_set__ = set(self.model_fields_set) | set(changes)
        return made

    def without(self, *names: str) -> Self:
        """A copy with the fields ``names`` unset (back to their defaults, and not written)."""
        fields = type(self).model_fields
        made = self.model_copy(update={n: fields[n].get_default(call_default_factory=True) for n in names})
        made.__pydantic_fields_set__ = set(self.model_fields_set) - set(names)
        return made


def _plain(value: Any) -> Any:
    if isinstance(value, Block):
        return value.to_doc()
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_unset=True)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def block_map(kind: type[B], raw: Mapping[str, Any]) -> dict[str, B]:
    """``{name: kind.from_doc(row)}`` for a mapping of rows (per-GPU blocks)."""
    return {str(k): kind.from_doc(v) for k, v in raw.items()}


__all__ = ["Block", "Num", "block_map"]
