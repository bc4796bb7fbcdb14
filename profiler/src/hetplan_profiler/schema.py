"""The profile file's JSON Schema (``profile.schema.json``, shared with hetplan) and a small checker for it.

The profiler checks every document against the schema before writing it. The checker implements the subset of
JSON Schema (draft 2020-12) the schema uses (``type``, ``enum``, ``const``, ``properties``, ``required``,
``additionalProperties``, ``items``, ``minProperties``, ``minLength``, the numeric bounds and local ``$ref``) and
refuses any other keyword, so the schema cannot grow a rule it would silently skip; hetplan checks what it reads
with the ``jsonschema`` package against the same file (a test checks the two agree). No dependency is added.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from hetplan_profiler.errors import ProfilerError

SCHEMA_FILE = "profile.schema.json"
_ANNOTATIONS = {"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples"}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
}


@cache
def load_schema() -> dict[str, Any]:
    """The profile file's JSON Schema, as shipped in this package."""
    text = resources.files("hetplan_profiler").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def schema_errors(doc: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Every place ``doc`` breaks ``schema`` (default: the profile schema), as ``path: message`` lines."""
    root = schema if schema is not None else load_schema()
    errors: list[str] = []
    _check(doc, root, root, "", errors)
    return errors


def check_profile(doc: dict[str, Any]) -> None:
    """Raise :class:`ProfilerError` when ``doc`` does not match the profile schema (a bug of this package)."""
    errors = schema_errors(doc)
    if errors:
        raise ProfilerError(
            "the profile does not match its schema (profile.schema.json)",
            "; ".join(errors[:8]),
            "report this bug; nothing was written",
        )


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref are supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return dict(node)


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str, errors: list[str]) -> None:
    where = path or "(document)"
    if "$ref" in schema:
        _check(value, _resolve(schema["$ref"], root), root, path, errors)
    for key, rule in schema.items():
        if key in _ANNOTATIONS or key == "$ref":
            continue
        if key == "type":
            names = rule if isinstance(rule, list) else [rule]
            if not any(_TYPES[n](value) for n in names):
                errors.append(f"{where}: {value!r} is not of type {' or '.join(names)}")
                return
        elif key == "enum":
            if value not in rule:
                errors.append(f"{where}: {value!r} is not one of {rule}")
        elif key == "const":
            if value != rule or isinstance(value, bool) != isinstance(rule, bool):
                errors.append(f"{where}: {value!r} is not {rule!r}")
        elif key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            if _TYPES["number"](value):
                bad = {
                    "minimum": value < rule,
                    "maximum": value > rule,
                    "exclusiveMinimum": value <= rule,
                    "exclusiveMaximum": value >= rule,
                }[key]
                if bad:
                    errors.append(f"{where}: {value!r} breaks {key} {rule!r}")
        elif key == "minLength":
            if isinstance(value, str) and len(value) < rule:
                errors.append(f"{where}: {value!r} is shorter than {rule}")
        elif key == "minProperties":
            if isinstance(value, dict) and len(value) < rule:
                errors.append(f"{where}: needs at least {rule} entries")
        elif key == "required":
            if isinstance(value, dict):
                errors.extend(f"{where}: {name!r} is required" for name in rule if name not in value)
        elif key == "properties":
            if isinstance(value, dict):
                for name, sub in rule.items():
                    if name in value:
                        _check(value[name], sub, root, f"{path}.{name}" if path else name, errors)
        elif key == "additionalProperties":
            if isinstance(value, dict):
                known = schema.get("properties", {})
                for name, item in value.items():
                    if name in known:
                        continue
                    if rule is False:
                        errors.append(f"{where}: unknown field {name!r}")
                    elif isinstance(rule, dict):
                        _check(item, rule, root, f"{path}.{name}" if path else str(name), errors)
        elif key == "items":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    _check(item, rule, root, f"{path}[{i}]", errors)
        else:
            raise ValueError(f"profile schema keyword {key!r} is not supported by hetplan_profiler.schema")
