"""Deterministic serialisation and atomic, no-clobber file writes.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from hetplan.errors import InputError, OutputExistsError


def to_json(doc: Any) -> str:
    """Stable JSON: fixed key order as built, 2-space indent, trailing newline."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def to_yaml(doc: Any) -> str:
    """Stable YAML in the document's key order."""
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)


def write_atomic(path: str | Path, text: str, force: bool = False) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename.

    Raises:
        OutputExistsError: ``path`` exists and ``force`` is False.
        InputError: the folder cannot be written.
    """
    path = Path(path)
    if path.exists() and not force:
        raise OutputExistsError(
            f"{path} already exists",
            "hetplan does not overwrite files unless asked",
            "pass --force to overwrite it, or choose another --out",
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the mode a plain open() would
        os.replace(tmp, path)
    except OSError as exc:
        raise InputError(f"cannot write {path}", str(exc), "check the folder exists and is writable") from None
    return path


def dump_for_path(path: str | Path, doc: Any) -> str:
    """JSON for ``*.json`` paths, YAML otherwise."""
    return to_json(doc) if str(path).endswith(".json") else to_yaml(doc)
