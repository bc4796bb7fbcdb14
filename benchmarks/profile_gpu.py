"""Run the quick profile (``hetplan-profile --quick``) on a GPU and compare it with the issue-3 targets for an H200.

Prints the wall time of the quick profile, bf16 GEMM TFLOP/s against the >= 700 target and device copy TB/s against
the >= 4.0 target (about 790 TFLOP/s and 4.3 TB/s are the ceilings measured on such a card), every measured figure,
and writes the profile file. Needs only the profiler package (``pip install ./profiler``: torch with CUDA and
PyYAML); where hetplan is importable too it also prints the catalog GPU the device matches and the efficiency
against its datasheet.

Usage: python benchmarks/profile_gpu.py [--device cuda:0] [--out profile.yaml] [--full]
Exit status: 0 when both targets are met, 1 when one is missed, 2 when the profile cannot be taken (the message
says why), 3 when no CUDA GPU is visible.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # hetplan from this checkout, when its dependencies are there (optional)

BF16_TARGET_TFLOPS = 700.0
COPY_TARGET_TB_PER_S = 4.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=Path("profile-gpu.yaml"))
    ap.add_argument("--full", action="store_true", help="the full profile instead of --quick")
    args = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print(f"no CUDA GPU visible (torch {torch.__version__}, CUDA build {torch.version.cuda})", file=sys.stderr)
        return 3
    from hetplan_profiler.cli import dump_text
    from hetplan_profiler.errors import ProfilerError
    from hetplan_profiler.run import ProfileRequest, run_profile

    def tell(name: str, done: int, total: int) -> None:
        print(f"[{done}/{total}] {name} ({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)

    quick = not args.full
    start = time.perf_counter()
    command = f"python benchmarks/profile_gpu.py --device {args.device}" + (" --full" if args.full else "")
    try:
        doc = run_profile(ProfileRequest(args.device, quick, command=command), tell)
    except ProfilerError as exc:  # bad device, busy GPU, no GEMM ran: the message, not a traceback
        print(exc.render(), file=sys.stderr)
        return 2
    wall = time.perf_counter() - start
    args.out.write_text(dump_text(doc, args.out), encoding="utf-8")
    m = doc["measured"]
    bf16 = m["gemm_tflops"].get("bf16", 0.0)
    copy_tb = m["memory_copy_gb_per_s"] / 1000
    ok_bf16, ok_copy = bf16 >= BF16_TARGET_TFLOPS, copy_tb >= COPY_TARGET_TB_PER_S
    print(f"device: {m['device_name']}")
    print(f"profile: {'quick' if quick else 'full'}, {wall:.1f} s wall (including CUDA start-up, not the torch import)")
    print(f"bf16 GEMM: {bf16:,.1f} TFLOP/s (target >= {BF16_TARGET_TFLOPS:g}): {'PASS' if ok_bf16 else 'FAIL'}")
    print(f"device copy: {copy_tb:.2f} TB/s (target >= {COPY_TARGET_TB_PER_S:g}): {'PASS' if ok_copy else 'FAIL'}")
    print(dump_text({"measured": m, "notes": doc["notes"], "device": doc["device"]}), end="")
    print(dump_text({"provenance": doc["provenance"]}), end="")
    best: dict[str, dict] = {}
    for row in doc["tables"].get("gemm", []):
        if row["tflops"] >= best.get(row["dtype"], {"tflops": 0})["tflops"]:
            best[row["dtype"]] = row
    for dtype, row in best.items():
        print(f"best {dtype} shape: {row['m']}x{row['n']}x{row['k']} ({row['shape']}), spread {row['spread']:.1%}")
    try:  # what hetplan makes of it, where hetplan's dependencies are installed too
        from hetplan.catalog.profile import profile_from_doc
    except ImportError:
        print("hetplan not installed here: catalog match and efficiency vs datasheet left to 'hetplan plan --profile'")
    else:
        prof = profile_from_doc(doc, "the profile just measured")
        print(f"hetplan: {m['device_name']} -> {prof.gpu.name} ({prof.match.how})")
        print(dump_text({"efficiency_vs_datasheet": prof.efficiency_vs_datasheet}), end="")
    print(f"wrote {args.out}")
    return 0 if ok_bf16 and ok_copy else 1


if __name__ == "__main__":
    raise SystemExit(main())
