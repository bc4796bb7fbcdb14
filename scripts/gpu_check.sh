#!/usr/bin/env bash
# One prepared device check for the profiler (issue 3): install the profiler package (profiler/) when it is not
# there, run hetplan-profile --quick on cuda:0 as a smoke test, then the quick profile again through
# benchmarks/profile_gpu.py, which prints bf16 GEMM TFLOP/s against the >= 700 target and device copy TB/s against
# the >= 4.0 target (H200).
# Usage: scripts/gpu_check.sh [OUT_DIR]   (profiles go to OUT_DIR/hetplan-profile.yaml and OUT_DIR/profile-gpu.yaml;
#        default $OUT or .)
# Needs python3 with a CUDA build of torch (installed first: an unpinned pip install torch may pick another build);
# hetplan itself need not be installed (where it is importable, the match to its catalog is printed too).
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir="${1:-${OUT:-.}}"
py="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
if ! "$py" -c "import torch" 2>/dev/null; then
  echo "missing Python package: torch (install a CUDA build of torch >= 2.3 first)" >&2
  exit 3
fi
if ! "$py" -c "import hetplan_profiler" 2>/dev/null; then
  # torch is there, so pip keeps it and adds PyYAML only; offline (no build backend to fetch), run it from the tree
  if ! "$py" -m pip install --quiet ./profiler; then
    echo "pip could not install ./profiler; running it from profiler/src of this checkout" >&2
    export PYTHONPATH="$PWD/profiler/src${PYTHONPATH:+:$PYTHONPATH}"
    "$py" -c "import yaml" 2>/dev/null || { echo "missing Python package: pyyaml" >&2; exit 3; }
  fi
fi
mkdir -p "$out_dir"
"$py" -m hetplan_profiler.cli --device cuda:0 --quick --out "$out_dir/hetplan-profile.yaml" --force
exec "$py" benchmarks/profile_gpu.py --device cuda:0 --out "$out_dir/profile-gpu.yaml"
