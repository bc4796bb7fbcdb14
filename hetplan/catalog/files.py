"""Read YAML and JSON input files (catalogs, scenarios, plans, price and profile files) with hetplan's rules,
and word a pydantic validation error as one line per field.

Duplicate keys are refused (the last one would silently win), JSON is read as JSON (YAML 1.1 would read 1e-05 as
text), and every document passes :func:`hetplan.input_checks.check_document` (aliases, depth, key types, numbers).

Source: hetplan's own reconstruction (after SkyPilot's catalog loader: schema versioned, errors that end with how
to fix them).
"""

from __future__ import annotations

import difflib
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from hetplan.errors import CatalogError, InputError
from hetplan.input_checks import check_document, load_json, read_text_input

T = TypeVar("T", bound=BaseModel)


def _unique_key_mapping(loader: yaml.constructor.SafeConstructor, node: yaml.MappingNode, deep: bool) -> dict[Any, Any]:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not (key is None or isinstance(key, str | int | float | bool)):  # ? [a, b] or ? {a: 1}: unhashable
            raise yaml.constructor.ConstructorError(
                None, None, f"a map key is a {type(key).__name__}, not text", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        seen.add(key)
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep)


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that refuses duplicate keys (the last one would silently win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        return _unique_key_mapping(self, node, deep)


# libyaml's parser with the same constructor, when PyYAML was built with it: the GPU catalog parses several times
# faster (`hetplan catalog gpus` starts sooner). A file it refuses is parsed again with _UniqueKeyLoader, so the
# error, whose wording differs between the two parsers, reads as before.
_FastUniqueKeyLoader: type[yaml.SafeLoader] | type[yaml.CSafeLoader] = _UniqueKeyLoader
if getattr(yaml, "__with_libyaml__", False):

    class _CUniqueKeyLoader(yaml.CSafeLoader):
        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            return _unique_key_mapping(self, node, deep)

    _FastUniqueKeyLoader = _CUniqueKeyLoader


def read_yaml_file(path: Path, schema: type[T], what: str, schema_doc: str = "see catalogs/README.md") -> T:
    """Read ``path`` as YAML (or JSON) and validate it against ``schema``.

    Raises:
        InputError: the file is missing, unreadable or not UTF-8 text.
        CatalogError: invalid YAML (with line and column) or content that does not match the schema (the
            message names the field path).
    """
    data = read_yaml_mapping(path, what, schema_doc)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(
            f"{what} {path} does not match its schema",
            format_validation(exc, schema),
            f"fix the named fields ({schema_doc})",
        ) from None


def read_yaml_mapping(path: Path, what: str, schema_doc: str = "see catalogs/README.md") -> dict[str, Any]:
    """Read ``path`` as a YAML (or JSON) mapping, unvalidated (duplicate keys refused).

    Raises:
        InputError / CatalogError: as :func:`read_yaml_file`, short of the schema check.
    """
    path = Path(path)
    try:
        text = read_text_input(path, what)
    except InputError as exc:
        if "UTF-8" in exc.what:
            raise InputError(exc.what, fix=f"pass a YAML file ({schema_doc})") from None
        raise
    if path.suffix.lower() == ".json":  # JSON is read as JSON: YAML 1.1 would read 1e-05 as text
        data = _load_json(text, path, what)
    else:
        data = _load_yaml(text, path, what)
    try:  # aliases, depth, key types, numbers (finite, at most hetplan.input_checks.MAX_NUMBER)
        check_document(data, f"{what} {path}")
    except InputError as exc:
        raise CatalogError(exc.what, exc.why, exc.fix) from None
    if data is None:
        raise CatalogError(f"{what} {path} is empty", fix=schema_doc)
    if not isinstance(data, dict):
        raise CatalogError(
            f"{what} {path} is not a YAML or JSON mapping of fields (is it the right file?)",
            f"it holds a {type(data).__name__}",
            schema_doc,
        )
    return data


def _load_json(text: str, path: Path, what: str) -> Any:
    """JSON text read by :func:`hetplan.input_checks.load_json` (depth checked before parsing, duplicate keys and
    NaN/Infinity refused, numbers under :func:`hetplan.input_checks.check_number`).

    Raises:
        CatalogError: invalid JSON (with line and column), too deep, a duplicate key or a bad number.
    """
    return load_json(text, f"{what} {path}", CatalogError)


def _load_yaml(text: str, path: Path, what: str) -> Any:
    try:
        try:
            return yaml.load(text, Loader=_FastUniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
        except yaml.YAMLError:
            return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - the same, in pure Python
    except RecursionError:
        raise CatalogError(f"{what} {path} nests too deeply to read", fix="check the file's structure") from None
    except ValueError as exc:  # PyYAML's int(): an integer of more than 4,300 digits
        raise CatalogError(
            f"{what} {path} holds a number hetplan cannot read", str(exc).split(":")[0], "fix the value"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise CatalogError(f"{what} {path} is not valid YAML{where}", str(problem), "fix the syntax") from None


def format_validation(exc: ValidationError, schema: type[BaseModel] | None = None) -> str:
    """One line per pydantic error: ``field.path: message``; with the ``schema`` that raised it, an unknown field
    also gets the known names closest to it (``did you mean 'goodput_req_per_s'?``)."""
    parts = []
    for err in exc.errors()[:8]:
        loc = ".".join(str(x) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden" and schema is not None and err["loc"]:
            known = _field_names(schema, err["loc"][:-1])
            close = difflib.get_close_matches(str(err["loc"][-1]), known, n=3, cutoff=0.5)
            if close:
                msg += " (did you mean " + ", ".join(repr(c) for c in close) + "?)"
        parts.append(f"{loc}: {msg}" if loc else msg)
    more = len(exc.errors()) - 8
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def _field_names(schema: type[BaseModel], path: Sequence[int | str]) -> list[str]:
    """The field names (and aliases) of the model found at ``path`` inside ``schema`` (list indexes and dict keys
    skipped), or [] when the path leaves the models."""
    model: Any = schema
    for part in path:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return []
        model = _inner_model(field.annotation)
        if model is None:
            return []
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return []
    names = set(model.model_fields)
    names |= {f.alias for f in model.model_fields.values() if f.alias}
    return sorted(names)


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (itself, or in Optional/list/tuple/dict/Annotated), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


__all__ = ["format_validation", "read_yaml_file", "read_yaml_mapping"]
