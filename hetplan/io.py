"""Deterministic serialisation and atomic, no-clobber file writes (the checks on what hetplan reads are in
:mod:`hetplan.input_checks`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from hetplan.errors import InputError, OutputError, OutputExistsError


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


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, outermost first."""
    return [f for f in reversed([folder, *folder.parents]) if not os.path.lexists(f)]


def _remove_folders(folders: list[Path]) -> None:
    for folder in reversed(folders):  # innermost first; only if still empty
        try:
            folder.rmdir()
        except OSError:
            pass


@contextlib.contextmanager
def atomic_target(path: str | Path, force: bool = False) -> Iterator[Path]:
    """The one atomic writer: yields a temporary file's path in ``path``'s folder; when the block ends, the file
    is fsync'd and renamed onto ``path``. Any exception (a full disk, Ctrl-C) removes the temporary file and the
    folders this call made, so nothing is left behind. For libraries that write to a path themselves (Parquet);
    text goes through :func:`write_atomic`.

    An existing regular file is replaced only with ``force`` (keeping its permission bits); folders, devices,
    pipes and other non-regular targets are always refused.

    Raises:
        OutputExistsError: ``path`` exists and ``force`` is False.
        InputError: the target is not a regular file or ends with a separator.
        OutputError: the folder cannot be made or written (read-only, full disk): exit 1, nothing left behind.
    """
    mode = check_output(path, force)
    path = Path(str(path))
    tmp: str | None = None
    made: list[Path] = []
    try:
        made = _missing_folders(path.parent)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        os.close(fd)
        yield Path(tmp)
        with open(tmp, "rb+") as fh:  # data on disk before the rename makes it visible
            os.fsync(fh.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask  # mkstemp creates 0600; give the file the mode a plain open() would
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        tmp = None
        made = []
    except OSError as exc:
        raise OutputError(
            f"cannot write {path}", str(exc), "check the folder exists, is writable and has space"
        ) from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        _remove_folders(made)


def write_atomic(path: str | Path, text: str | bytes, force: bool = False) -> Path:
    """Write ``text`` (or bytes) to ``path`` through :func:`atomic_target` (a temporary file in the same folder,
    fsync, rename).

    Raises:
        OutputExistsError, InputError, OutputError: as :func:`atomic_target`.
    """
    with atomic_target(path, force) as tmp:
        if isinstance(text, bytes):
            tmp.write_bytes(text)
        else:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
    return Path(str(path))


def write_files_atomic(files: Mapping[Path, str], force: bool = False) -> list[Path]:
    """Write several files, each atomically; all are checked before the first is written, and if one fails (a
    full disk, Ctrl-C) the files and folders this call created are removed again, so a half-written set is never
    left (files that ``force`` replaced stay replaced).

    Raises:
        OutputExistsError, InputError, OutputError: as :func:`atomic_target`.
    """
    for path in files:
        check_output(path, force)
    created: list[Path] = []
    try:
        for path, text in files.items():
            created += _missing_folders(path.parent)
            if not os.path.lexists(path):
                created.append(path)
            write_atomic(path, text, force=force)
    except BaseException:
        remove_created(created)
        raise
    return list(files)


def remove_created(created: list[Path]) -> None:
    """Undo a failed multi-file write: remove the files and (empty) folders in ``created``, newest first; what
    cannot be removed is left. Used by :func:`write_files_atomic` and ``hetplan emit``."""
    for made in reversed(created):
        try:
            made.rmdir() if made.is_dir() else made.unlink(missing_ok=True)
        except OSError:
            pass


@contextlib.contextmanager
def undo_new_files_on_write_error(folder: Path) -> Iterator[None]:
    """On :class:`OutputError` (a full disk, a read-only folder) in the block, remove every file and folder under
    ``folder`` (and ``folder`` and its parents) that the block created; what was there before stays. Other
    exceptions (Ctrl-C) leave the new files: complete, atomically written files a rerun can reuse.

    Raises:
        OutputError: re-raised after the clean-up.
    """
    made = _missing_folders(folder)
    before = set(folder.rglob("*")) if folder.is_dir() else set()
    try:
        yield
    except OutputError:
        if folder.is_dir():
            new = sorted((p for p in folder.rglob("*") if p not in before), key=lambda p: len(p.parts), reverse=True)
            for path in new:
                try:
                    path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
                except OSError:
                    pass
        _remove_folders(made)
        raise


def dump_for_path(path: str | Path, doc: Any) -> str:
    """JSON for ``*.json`` paths, YAML otherwise."""
    return to_json(doc) if str(path).lower().endswith(".json") else to_yaml(doc)
