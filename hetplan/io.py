"""Deterministic serialisation and atomic, no-clobber file writes.

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import yaml

from hetplan.errors import InputError, OutputExistsError


def to_json(doc: Any) -> str:
    """Stable JSON: fixed key order as built, 2-space indent, trailing newline; NaN/inf are refused."""
    return json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


class _NoAliasDumper(yaml.SafeDumper):
    """Safe dumper that writes a repeated object out again instead of as an ``&id001`` anchor and ``*id001``
    alias: plan files are diffed in CI and read by tools that do not expect aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(doc: Any) -> str:
    """Stable YAML in the document's key order, without anchors or aliases."""
    return yaml.dump(doc, Dumper=_NoAliasDumper, sort_keys=False, allow_unicode=True, width=120)


def check_output(path: str | Path, force: bool) -> int | None:
    """Check that ``path`` may be written (see :func:`write_atomic`); return the mode of the file it replaces.

    Raises:
        OutputExistsError / InputError: as :func:`write_atomic`.
    """
    raw = str(path)
    if raw in ("", "-") or raw.endswith(("/", os.sep)):
        raise InputError(
            f"--out {raw!r} is not a file path", fix="give a file name (leave --out out to print to stdout)"
        )
    target = Path(raw)
    if not os.path.lexists(target):
        return None
    if target.is_symlink() or not target.is_file():
        raise InputError(f"{target} exists and is not a regular file", fix="choose another --out")
    if not force:
        raise OutputExistsError(
            f"{target} already exists",
            "hetplan does not overwrite files unless asked",
            "pass --force to overwrite it, or choose another --out",
        )
    return stat.S_IMODE(target.stat().st_mode)


def write_atomic(path: str | Path, text: str, force: bool = False) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename.

    An existing regular file is replaced only with ``force`` (keeping its permission bits); folders, devices,
    pipes and other non-regular targets are always refused, and a failed write leaves nothing behind.

    Raises:
        OutputExistsError: ``path`` exists and ``force`` is False.
        InputError: the target is not a regular file, ends with a separator, or the folder cannot be written.
    """
    mode = check_output(path, force)
    path = Path(str(path))
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # mkstemp creates 0600; give the file the mode a plain open() would
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise InputError(f"cannot write {path}", str(exc), "check the folder exists and is writable") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return path


def dump_for_path(path: str | Path, doc: Any) -> str:
    """JSON for ``*.json`` paths, YAML otherwise."""
    return to_json(doc) if str(path).lower().endswith(".json") else to_yaml(doc)
