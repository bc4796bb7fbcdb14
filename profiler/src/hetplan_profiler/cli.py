"""``hetplan-profile``: measure one device and write the profile file (argparse; hetplan is not needed).

Examples::

    hetplan-profile --quick --out h100.yaml                  # cuda:0, about a minute
    hetplan-profile --device cpu --quick --out p.yaml        # the same code at tiny sizes (a test of the tool)
    hetplan-profile --out h100.yaml --kernel-tables tables/  # and the kernel tables (benchmarks/kernel_curves.py)
    hetplan-profile --gpu H100 --model Llama-3-70B --out h100.yaml
    hetplan-profile --model My-Model --hidden-size 5120 --heads 40 --kv-heads 8 --head-dim 128 --ffn-size 13824

Exit status: 0 written (or printed), 2 bad input or a device that cannot be measured (the message says why).
Then: ``hetplan plan SCENARIO --profile h100.yaml`` (hetplan matches the device to its catalog).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from hetplan_profiler import SCHEMA_VERSION, __version__
from hetplan_profiler.errors import ProfilerError
from hetplan_profiler.kernel_tables import check_kernel_tables, system_name, write_kernel_tables
from hetplan_profiler.shapes import BUILTIN, DEFAULT_MODEL, resolve_shape


def dump_text(doc: dict[str, Any], path: str | Path | None = None) -> str:
    """The profile as file text: JSON when ``path`` ends in ``.json``, else YAML in the document's key order."""
    if path is not None and str(path).endswith(".json"):
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    import yaml

    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)


def write_file(path: Path, text: str, force: bool) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file in the same folder, then a rename).

    Raises:
        ProfilerError: ``path`` exists and ``force`` is not set, or is a folder.
    """
    if path.is_dir():
        raise ProfilerError(f"--out {path} is a folder", fix="give a file name")
    if path.exists() and not force:
        raise ProfilerError(f"--out {path} already exists", "nothing is overwritten unless asked", "pass --force")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def summary(doc: dict[str, Any]) -> str:
    """The measured figures as a few lines of text (hetplan adds the datasheet and efficiency when it reads it)."""
    m = doc["measured"]
    label = "CPU" if m["device_kind"] == "cpu" else "GPU"
    lines = [f"{m['device_name']} ({label})" + (f", filed under {doc['file_under']}" if doc.get("file_under") else "")]
    for dtype, value in sorted(m["gemm_tflops"].items()):
        lines.append(f"  GEMM {dtype:<5} {value:>12,.4g} TFLOP/s")
    lines.append(f"  memory read  {m['memory_read_gb_per_s']:>10,.4g} GB/s")
    lines.append(f"  memory copy  {m['memory_copy_gb_per_s']:>10,.4g} GB/s")
    if m.get("host_to_device_gb_per_s"):
        lines.append(f"  host -> device {m['host_to_device_gb_per_s']:>8,.4g} GB/s (pinned)")
    if m.get("allreduce_bus_gb_per_s"):
        lines.append(f"  all-reduce bus {m['allreduce_bus_gb_per_s']:>8,.4g} GB/s ({m['allreduce_gpus']} GPUs)")
        lines.append(f"  all-reduce latency {m['allreduce_latency_s'] * 1e6:,.1f} us (smallest message)")
    lines += [f"note: {n}" for n in doc["notes"]]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="hetplan-profile",
        description="Measure a GPU (GEMM TFLOP/s per dtype, memory and host bandwidth, attention, NCCL all-reduce) "
        f"and write hetplan's profile file (schema version {SCHEMA_VERSION}).",
        epilog="Then: hetplan plan SCENARIO --profile FILE. See docs/profile.md in the hetplan repository.",
    )
    ap.add_argument("--device", "-d", default="cuda:0", help="cuda, cuda:N or cpu (cpu: small sizes, a test)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repeats (about a minute on a GPU)")
    ap.add_argument("--out", "-o", type=Path, help="write the profile here (YAML; JSON for *.json)")
    ap.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    ap.add_argument("--json", action="store_true", help="print the profile as JSON on stdout")
    ap.add_argument(
        "--kernel-tables",
        type=Path,
        metavar="DIR",
        help="also write the GEMM, attention and all-reduce rows as kernel tables (CSV, the kernel-curve fit's "
        "schema) under DIR/SYSTEM/FAMILY/hetplan-profile/VERSION/",
    )
    ap.add_argument("--system", help="SYSTEM folder for --kernel-tables (default: the device name, e.g. nvidia_h100)")
    ap.add_argument(
        "--gpu",
        "-g",
        help="catalog GPU to file the figures under (hetplan checks the name when it reads the file; "
        "default: hetplan matches the device name)",
    )
    shapes = ap.add_argument_group(
        "model shapes", f"weight and attention shapes the benchmarks use; built-in --model: {', '.join(BUILTIN)}"
    )
    shapes.add_argument("--model", "-m", default=DEFAULT_MODEL, help=f"shape set name (default {DEFAULT_MODEL})")
    shapes.add_argument("--hidden-size", type=int)
    shapes.add_argument("--heads", type=int, dest="num_attention_heads", help="attention heads")
    shapes.add_argument("--kv-heads", type=int, dest="num_key_value_heads", help="KV heads (GQA)")
    shapes.add_argument("--head-dim", type=int)
    shapes.add_argument("--ffn-size", type=int, help="MLP width (an expert's, for a mixture of experts)")
    shapes.add_argument(
        "--gated-mlp", action=argparse.BooleanOptionalAction, default=None, help="gate + up fused (SwiGLU)"
    )
    ap.add_argument("--version", action="version", version=f"hetplan-profiler {__version__}")
    return ap


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status."""
    args = parser().parse_args(argv)
    try:
        return _run(args, sys.argv[1:] if argv is None else argv)
    except ProfilerError as exc:
        print(exc.render(), file=sys.stderr)
        return exc.exit_code


def _run(args: argparse.Namespace, argv: list[str]) -> int:
    from hetplan_profiler.run import ProfileRequest, run_profile

    if args.out is not None and args.out.exists() and not args.force:  # before minutes of measuring
        raise ProfilerError(f"--out {args.out} already exists", "nothing is overwritten unless asked", "pass --force")
    if args.system is not None and args.kernel_tables is None:
        raise ProfilerError("--system names the --kernel-tables folder", fix="pass --kernel-tables DIR as well")
    if args.kernel_tables is not None and args.system is not None:
        check_kernel_tables(args.kernel_tables, args.system, args.force)
    shape = resolve_shape(
        args.model,
        hidden_size=args.hidden_size,
        num_attention_heads=args.num_attention_heads,
        num_key_value_heads=args.num_key_value_heads,
        head_dim=args.head_dim,
        ffn_size=args.ffn_size,
        gated_mlp=args.gated_mlp,
    )
    command = " ".join(["hetplan-profile", *argv])

    def tell(name: str, done: int, total: int) -> None:
        print(f"[{done}/{total}] {name}", file=sys.stderr, flush=True)

    doc = run_profile(ProfileRequest(args.device, args.quick, shape, args.gpu, command), tell)
    if args.kernel_tables is not None:  # before --out is written: nothing partial
        check_kernel_tables(args.kernel_tables, args.system or system_name(doc["device"]["device_name"]), args.force)
    if args.out is not None:
        write_file(args.out, dump_text(doc, args.out), args.force)
    if args.kernel_tables is not None:
        for path in write_kernel_tables(doc, args.kernel_tables, args.system, args.force):
            print(f"wrote {path}", file=sys.stderr)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    else:
        print(summary(doc))
    if args.out is not None:
        print(f"wrote {args.out}; plan with it: hetplan plan SCENARIO --profile {args.out}", file=sys.stderr)
    elif not args.json:
        print("not saved: pass --out FILE to keep the profile (and its per-shape tables)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
