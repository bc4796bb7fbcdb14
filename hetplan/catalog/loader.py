"""Load the shipped catalogs and user files, and look names up with "did you mean" suggestions.

The catalogs ship inside the wheel as ``hetplan/_catalogs`` (built from the repository's ``catalogs/``); in a
source checkout or an editable install the repository folder is used. :func:`use_catalog_dir` points elsewhere (a
folder with your own measured or negotiated figures): the CLI calls it with ``HETPLAN_CATALOG_DIR``.

Source: hetplan's own reconstruction (after SkyPilot's catalog loader: one function per catalog, schema
versioned, errors that end with how to fix them).
"""

from __future__ import annotations

import difflib
import functools
import os
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from hetplan.catalog.schemas import (
    GpuCatalog,
    GpuSpec,
    ModelCatalog,
    ModelSpec,
    PriceCatalog,
    PriceEntry,
    UserPriceFile,
)
from hetplan.errors import CatalogError, InputError
from hetplan.io import check_document, load_json, read_text_input

T = TypeVar("T", bound=BaseModel)


CATALOG_FILES = ("gpus.yaml", "models.yaml", "prices.yaml")
"""The catalog files proper, in the order :func:`catalog_sha256` hashes them; a user catalog folder holds all three."""

_SHIPPED = (Path(__file__).resolve().parents[1] / "_catalogs", Path(__file__).resolve().parents[1].parent / "catalogs")
_FOLDER: list[Path] = []  # the folder use_catalog_dir chose; empty: the shipped catalogs


def use_catalog_dir(folder: Path | None, named_by: str = "the catalog folder") -> None:
    """Read the catalogs from ``folder`` from now on in this process (None: the shipped ones), and drop what was
    loaded from the previous folder. The caller decides: the CLI passes ``HETPLAN_CATALOG_DIR`` (read in
    :mod:`hetplan.cli.app`, the one place that reads it), a sweep worker the driver's folder, an API caller its own;
    library code never reads the environment. ``named_by`` names where ``folder`` came from in the error.

    Raises:
        CatalogError: ``folder`` is not a folder, or lacks one of :data:`CATALOG_FILES` (named in the message).
    """
    if folder is not None:
        folder = Path(folder)
        missing = [name for name in CATALOG_FILES if not (folder / name).is_file()]
        if not folder.is_dir() or missing:
            raise CatalogError(
                f"{named_by} ({folder}) is not a hetplan catalog folder",
                "the folder does not exist" if not folder.is_dir() else f"it lacks {', '.join(missing)}",
                f"point {named_by} at a folder holding {', '.join(CATALOG_FILES)} (hetplan profile merge --out "
                "writes one), or leave it unset for the shipped catalogs",
            )
    if _FOLDER[:1] == ([folder] if folder is not None else []):
        return
    _FOLDER[:] = [folder] if folder is not None else []
    clear_catalog_caches()


def clear_catalog_caches() -> None:
    """Forget every catalog file loaded so far (the GPU, model and price catalogs and the fitted perf curves)."""
    from hetplan.perf.calibration import load_perf_catalog

    for fn in (load_gpus, load_models, load_prices, load_perf_catalog):
        fn.cache_clear()


def catalog_dir() -> Path:
    """Return the folder that holds ``gpus.yaml``, ``prices.yaml`` and ``models.yaml``: the one
    :func:`use_catalog_dir` chose, else the shipped catalogs.

    Raises:
        CatalogError: no catalog folder can be found (a broken install).
    """
    candidates = [*_FOLDER, *_SHIPPED]
    for folder in candidates:
        if (folder / "gpus.yaml").is_file():
            return folder
    raise CatalogError(
        "cannot find hetplan's catalogs",
        f"looked in: {', '.join(str(c) for c in candidates)}",
        "reinstall hetplan (pip install .) or set HETPLAN_CATALOG_DIR to a folder with gpus.yaml",
    )


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
    try:  # aliases, depth, key types, numbers (finite, at most hetplan.io.MAX_NUMBER)
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
    """JSON text read by :func:`hetplan.io.load_json` (depth checked before parsing, duplicate keys and
    NaN/Infinity refused, numbers under :func:`hetplan.io.check_number`).

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


def perf_files(folder: Path | None = None) -> dict[str, Path]:
    """The fitted engine curves in use, ``engine -> path``, sorted by engine: every ``perf/<engine>.yaml`` of the
    catalog folder ``folder`` (default :func:`catalog_dir`), and the shipped file of each engine that folder does
    not fit (how :func:`hetplan.perf.calibration.perf_catalog_path` resolves them).

    Raises:
        CatalogError: no catalog folder (see :func:`catalog_dir`).
    """
    folder = catalog_dir() if folder is None else folder
    found: dict[str, Path] = {}
    for place in (*reversed(_SHIPPED), folder):  # later folders win
        perf = place / "perf"
        if perf.is_dir():
            found.update({p.stem: p for p in perf.glob("*.yaml") if p.is_file()})
    return dict(sorted(found.items()))


def catalog_sha256(overlay: Sequence[GpuSpec] = ()) -> str:
    """SHA-256 (hex) over everything in the catalog that decides a plan, recorded in plans so a figure can be traced
    to the catalog that produced it: ``gpus.yaml``, ``models.yaml``, ``prices.yaml`` (in that order), then the
    fitted engine curves in use (:func:`perf_files`, by engine), each prefixed by its name; then, when ``overlay``
    is given (the GPU entries of ``--profile`` files that replace or add catalog GPUs), each entry's JSON. A refit
    of one constant in ``catalogs/perf/`` or a different profile changes the hash.

    Raises:
        CatalogError: no catalog folder (see :func:`catalog_dir`).
    """
    import hashlib

    folder = catalog_dir()
    h = hashlib.sha256()
    named = [(name, folder / name) for name in CATALOG_FILES]
    named += [(f"perf/{engine}.yaml", path) for engine, path in perf_files(folder).items()]
    for name, path in named:
        h.update(name.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"")
    for spec in overlay:
        h.update(b"overlay\0" + spec.model_dump_json(exclude_none=True).encode())
    return h.hexdigest()


@functools.cache
def load_gpus() -> GpuCatalog:
    """The shipped GPU catalog (cached)."""
    return read_yaml_file(catalog_dir() / "gpus.yaml", GpuCatalog, "GPU catalog")


@functools.cache
def load_prices() -> PriceCatalog:
    """The shipped price catalog (cached)."""
    return read_yaml_file(catalog_dir() / "prices.yaml", PriceCatalog, "price catalog")


@functools.cache
def load_models() -> ModelCatalog:
    """The shipped model catalog (cached)."""
    return read_yaml_file(catalog_dir() / "models.yaml", ModelCatalog, "model catalog")


def overlaid_gpus(overlay: Sequence[GpuSpec] = ()) -> tuple[GpuSpec, ...]:
    """The GPU catalog with ``overlay`` applied: each of its entries (a ``--profile`` file's measured GPU) replaces
    the catalog entry of the same name, and new names follow the catalog's. The caller passes the table to
    :func:`find_gpu` and to what resolves GPU names for a plan (:func:`hetplan.planning.request.build_request`)."""
    base = load_gpus().gpus
    if not overlay:
        return base
    by_name = {g.name: g for g in overlay}
    known = {g.name for g in base}
    return tuple(by_name.get(g.name, g) for g in base) + tuple(g for g in by_name.values() if g.name not in known)


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=3, cutoff=0.5)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[c] for c in difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.4)]
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else ""


def find_gpu(name: str, gpus: tuple[GpuSpec, ...] | None = None) -> GpuSpec:
    """Look a GPU up by name or alias, ignoring case and punctuation (``h100`` finds ``H100-SXM``), in ``gpus``
    (default: the GPU catalog; :func:`overlaid_gpus` gives it with profiled GPUs).

    Raises:
        InputError: unknown name, with suggestions.
    """
    gpus = gpus if gpus is not None else load_gpus().gpus
    wanted = _norm(name)
    for gpu in gpus:
        if wanted == _norm(gpu.name) or any(wanted == _norm(a) for a in gpu.aliases):
            return gpu
    names = [g.name for g in gpus] + [a for g in gpus for a in g.aliases]
    hint = _suggest(name, names)
    raise InputError(
        f"unknown GPU {name!r}",
        hint or "no catalog GPU has a similar name",
        "run 'hetplan catalog gpus' to list the known GPUs",
    )


def find_model(name: str) -> ModelSpec:
    """Look a model up by catalog name or Hugging Face repo, or read a ``config.json`` path.

    Raises:
        InputError: unknown name (with suggestions) or an unreadable config file.
    """
    path = Path(name)
    # os.path's checks are False (not an error) for text too long to be a path
    if name.endswith(".json") or os.path.isfile(path) or os.path.isfile(path / "config.json"):
        return model_from_hf_config(path)
    wanted = _norm(name)
    models = load_models().models
    for model in models:
        if wanted in (_norm(model.name), _norm(model.hf_repo)):
            return model
    hint = _suggest(name, [m.name for m in models])
    raise InputError(
        f"unknown model {name!r}",
        hint or "no catalog model has a similar name",
        "run 'hetplan catalog models', or pass a Hugging Face config.json path to --model",
    )


def model_from_hf_config(path: Path) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json`` (file or folder holding one).

    Reads ``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``, ``num_key_value_heads``
    (default: attention heads), ``head_dim`` (default hidden/heads), ``intermediate_size`` (or OPT's
    ``ffn_dim``), ``vocab_size``, ``max_position_embeddings``, ``tie_word_embeddings``; MoE keys
    ``num_local_experts``/``n_routed_experts``, ``num_experts_per_tok``, ``moe_intermediate_size``,
    ``n_shared_experts``, ``first_k_dense_replace``; MLA keys ``kv_lora_rank``, ``qk_rope_head_dim``.

    Raises:
        InputError: the file is missing, not JSON, or lacks a required key (named in the message).
    """
    file = path / "config.json" if path.is_dir() else path
    try:  # a regular file (never a FIFO or /dev/zero), nesting and numbers checked (hetplan.io.load_json)
        cfg = load_json(read_text_input(file, "model config"), f"model config {file}")
    except InputError as exc:
        raise InputError(
            exc.what, exc.why, exc.fix if "JSON" not in exc.what else "pass a Hugging Face config.json"
        ) from None
    if not isinstance(cfg, dict):
        raise InputError(f"model config {file} is not a JSON object", fix="pass a Hugging Face config.json")

    def need(*keys: str) -> Any:
        for key in keys:
            if cfg.get(key) is not None:
                return cfg[key]
        raise InputError(
            f"model config {file} lacks {' or '.join(keys)}", fix="pass a decoder-only transformer's config.json"
        )

    try:
        hidden = int(need("hidden_size", "d_model", "n_embd"))
        heads = int(need("num_attention_heads", "n_head"))
        experts = cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts")
        fields: dict[str, Any] = {
            "name": _config_model_name(cfg, file),
            "hf_repo": cfg.get("_name_or_path", ""),
            "architecture": (cfg.get("architectures") or [""])[0],
            "hidden_size": hidden,
            "num_hidden_layers": int(need("num_hidden_layers", "n_layer")),
            "num_attention_heads": heads,
            "num_key_value_heads": int(_get(cfg, "num_key_value_heads", heads)),
            "head_dim": int(_get(cfg, "head_dim", hidden // heads)),
            "intermediate_size": int(need("intermediate_size", "ffn_dim", "n_inner")),
            "vocab_size": int(need("vocab_size")),
            "max_position_embeddings": int(cfg.get("max_position_embeddings") or cfg.get("n_positions") or 4096),
            "tie_word_embeddings": bool(cfg.get("tie_word_embeddings", False)),
            "gated_mlp": "ffn_dim" not in cfg and cfg.get("hidden_act", "silu") != "relu",
            "source": str(file),
            "params_method": "computed from config",
        }
        if experts:
            fields["num_experts"] = int(experts)
            fields["experts_per_token"] = int(need("num_experts_per_tok"))
            if cfg.get("moe_intermediate_size"):
                fields["moe_intermediate_size"] = int(cfg["moe_intermediate_size"])
            fields["num_shared_experts"] = int(cfg.get("n_shared_experts") or 0)
            fields["first_k_dense_replace"] = int(cfg.get("first_k_dense_replace") or 0)
        if cfg.get("kv_lora_rank"):
            fields["kv_lora_rank"] = int(cfg["kv_lora_rank"])
            fields["qk_rope_head_dim"] = int(cfg.get("qk_rope_head_dim") or 64)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError) as exc:
        raise InputError(
            f"model config {file} has a value hetplan cannot use",
            f"{type(exc).__name__}: {exc}",
            "check the head counts and sizes: positive integers",
        ) from None
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise InputError(
            f"model config {file} is not usable", format_validation(exc), "check the config's head counts"
        ) from None


def _config_model_name(cfg: dict[str, Any], file: Path) -> str:
    """A short name for a model read from ``file``: the config's ``_name_or_path`` (a Hugging Face repo, or the last
    part of a local path), else the folder holding ``config.json``, else the file's stem. The full path stays in
    the spec's ``source``."""
    named = str(cfg.get("_name_or_path") or "").strip()
    if named:
        local = named.startswith(("/", "./", "../", "~")) or "\\" in named
        return (Path(named.rstrip("/\\")).name or named) if local else named
    if file.name == "config.json" and file.resolve().parent.name:
        return file.resolve().parent.name
    return file.stem


def _get(cfg: dict[str, Any], key: str, default: Any) -> Any:
    """``cfg[key]`` unless absent or null (a present 0 is kept, so validation can reject it)."""
    value = cfg.get(key)
    return default if value is None else value


def price_rows(gpu: GpuSpec) -> list[PriceEntry]:
    """All catalog price rows for ``gpu`` (matched by canonical name)."""
    return [p for p in load_prices().prices if p.gpu == gpu.name]


def load_user_prices(path: Path) -> UserPriceFile:
    """Read a user price file (see :class:`UserPriceFile`)."""
    return read_yaml_file(path, UserPriceFile, "price file", "see docs/reference/price-file.md")
