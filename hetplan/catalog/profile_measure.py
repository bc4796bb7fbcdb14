"""hetplan's side of measuring (``hetplan profile``): :func:`measure` calls the separately installed profiler
package (``hetplan_profiler``, imported there only) with a catalog model's shapes (:func:`model_shape_fields`) and
reads what it returns as a profile (:func:`hetplan.catalog.profile.profile_from_doc`).

Source: hetplan's own reconstruction.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hetplan.catalog.profile import ProfileFile, profile_from_doc
from hetplan.catalog.schemas import ModelSpec
from hetplan.errors import HetplanError, InputError

if TYPE_CHECKING:
    from hetplan.catalog.context import Catalog

PROFILER_INSTALL = (
    "from a hetplan clone: pip install ./profiler (it needs torch >= 2.3 and pulls it in when missing; an "
    "unpinned torch on Linux is a multi-GB CUDA build, so to try it on a CPU install a CPU build of torch first: "
    "pip install torch --index-url https://download.pytorch.org/whl/cpu)"
)


def model_shape_fields(spec: ModelSpec) -> dict[str, Any]:
    """What the profiler's ``ModelShape`` (the ``model_shapes`` block) takes of a catalog model: one layer's
    dimensions, with an expert's MLP width for a mixture of experts."""
    ff = spec.moe_intermediate_size if spec.is_moe and spec.moe_intermediate_size else spec.intermediate_size
    return {
        "name": spec.name,
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "head_dim": spec.head_dim,
        "ffn_size": ff,
        "gated_mlp": spec.gated_mlp,
    }


def measure(
    device: str,
    quick: bool,
    model: str,
    gpu: str | None,
    command: str,
    catalog: Catalog,
    progress: Callable[[str, int, int], None] | None = None,
) -> tuple[dict[str, Any], ProfileFile]:
    """``hetplan profile``: measure ``device`` with the installed profiler package (``hetplan_profiler``, imported
    here only) using ``catalog``'s model ``model``'s shapes; returns the profile document as the profiler writes it and
    its resolved form (matched to the catalog, for the summary).

    Raises:
        HetplanError (exit 1): the profiler package is not installed (the message says how to install it).
        InputError: unknown ``model`` or ``gpu`` (before anything is measured), torch missing, a bad device or one
            torch cannot use.
    """
    try:
        from hetplan_profiler.errors import ProfilerError
        from hetplan_profiler.run import ProfileRequest, run_profile
        from hetplan_profiler.shapes import ModelShape
    except ImportError as exc:
        if (exc.name or "").split(".")[0] != "hetplan_profiler":
            raise
        raise HetplanError(
            "hetplan profile needs the hetplan profiler package (hetplan-profiler), which is not installed",
            "measuring lives in a package of its own (profiler/ in the hetplan repository) so that hetplan does not "
            "need torch; every other command, 'hetplan profile merge' and 'hetplan profile fit' included, works "
            "without it",
            PROFILER_INSTALL,
        ) from None
    spec = catalog.find_model(model)
    if gpu:
        catalog.find_gpu(gpu)  # an unknown --gpu is refused before minutes of measuring
    try:
        shape = ModelShape(**model_shape_fields(spec))
        doc = run_profile(ProfileRequest(device, quick, shape, gpu, command, tool="hetplan profile"), progress)
    except ProfilerError as exc:
        raise InputError(exc.what, exc.why, exc.fix) from None
    return doc, profile_from_doc(doc, "the profile just measured", catalog)


def save_kernel_tables(doc: dict[str, Any], root: Path, force: bool, check_only: bool = False) -> list[Path]:
    """``hetplan profile --kernel-tables DIR``: write the profile's GEMM, attention and all-reduce rows as kernel
    tables (CSV, the schema ``benchmarks/kernel_curves.py`` fits; ``hetplan_profiler.kernel_tables``) under
    ``root/<device name>/<family>/hetplan-profile/<version>/``; with ``check_only``, only refuse what would fail.

    Raises:
        InputError: ``root`` is a file, or the tables exist and ``force`` is not set.
    """
    from hetplan_profiler.errors import ProfilerError
    from hetplan_profiler.kernel_tables import check_kernel_tables, system_name, write_kernel_tables

    try:
        if check_only:
            check_kernel_tables(root, system_name(str(doc["device"]["device_name"])), force)
            return []
        written: list[Path] = write_kernel_tables(doc, root, force=force)
        return written
    except ProfilerError as exc:
        raise InputError(exc.what, exc.why, exc.fix) from None
