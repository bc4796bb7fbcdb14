"""Time ``hetplan estimate --points`` on all 4,312 measured calibration rows (target: under 30 s on 2 cores).

    python benchmarks/points_speed.py

Aggregated rows become points as in :mod:`silicon`; disaggregated rows become points of their decode role (decode
TP / attention DP / EP, concurrency = decode batch), so every row of the file is estimated once. Runs the real CLI
in a subprocess (start-up included) and prints the wall time, rows estimated and rows refused.
Reads ``../shared/data`` (benchmarks may; the package never does).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

import silicon  # noqa: E402


def all_rows() -> pd.DataFrame:
    """Every row of the calibration file as a point (see module docstring)."""
    df = pd.read_csv(silicon.CSV)
    dis = df["mode"] != "agg"

    def pick(agg: str, dec: str) -> pd.Series:
        return df[agg].where(~dis, df[dec])

    return pd.DataFrame(
        {
            "engine": df["backend"],
            "model": df["model_path"].map(silicon.MODEL),
            "gpu": df["system"].map(silicon.GPU),
            "tp": pick("tp_size", "decode_tp_size").fillna(1).astype(int),
            "pp": pick("pp_size", "decode_pp_size").fillna(1).astype(int),
            "ep": pick("moe_ep_size", "decode_moe_ep_size").fillna(1).astype(int),
            "dp_attention": pick("attention_dp_size", "decode_attention_dp_size").fillna(1).astype(int),
            "weight_dtype": [silicon.weight_dtype(r) for _, r in df.iterrows()],
            "concurrency": pick("batch_size", "decode_batch_size").fillna(1).astype(int),
            "isl": df["isl"].astype(int),
            "osl": df["osl"].astype(int),
        }
    )


def main() -> int:
    """Write the points, run the CLI, print the figures."""
    frame = all_rows()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "points.csv"
        frame.to_csv(path, index=False)
        t0 = time.perf_counter()
        res = subprocess.run(
            [
                sys.executable,
                "-c",
                "from hetplan.cli.main import main; main()",
                "estimate",
                "--points",
                str(path),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - t0
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        return 1
    doc = json.loads(res.stdout)
    refused = sum("error" in r for r in doc)
    print(f"hetplan estimate --points: {len(doc)} rows in {wall:.1f} s wall (CLI start-up included); "
          f"{len(doc) - refused} estimated, {refused} row errors (layouts hetplan refuses)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
