#!/usr/bin/env bash
# One prepared device check for hetplan profile (issue 3): run the quick profile on cuda:0 and print bf16 GEMM
# TFLOP/s against the >= 700 target and device copy TB/s against the >= 4.0 target (H200).
# Usage: scripts/gpu_check.sh [OUT_DIR]   (the profile is written to OUT_DIR/profile-gpu.yaml; default $OUT or .)
# Needs python3 with a CUDA build of torch, numpy, pyyaml and pydantic; hetplan itself need not be installed.
set -euo pipefail
cd "$(dirname "$0")/.."
out_dir="${1:-${OUT:-.}}"
py="${PYTHON:-python3}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true
missing=$("$py" - <<'PY'
import importlib.util
print(" ".join(m for m in ("torch", "numpy", "yaml", "pydantic") if importlib.util.find_spec(m) is None))
PY
)
if [ -n "$missing" ]; then
  echo "missing Python packages: $missing (install them, e.g. pip install '.[profile]' from the hetplan checkout)" >&2
  exit 3
fi
mkdir -p "$out_dir"
exec "$py" benchmarks/profile_gpu.py --device cuda:0 --out "$out_dir/profile-gpu.yaml"
