"""Fidelity gate: the calibrated model on a shipped subset of held-out measured serving points (issue 13).

The subset (``tests/fixtures/perf/silicon_validation_sample.csv``) holds rows of models the fit never saw; the test
fails when the median |relative error| of mean TTFT or TPOT rises above the stored thresholds
(``fidelity_threshold.json``). Refresh both on purpose with ``python benchmarks/fidelity.py --refresh-fixture``
after refitting (``benchmarks/calibrate_perf.py``), as the cost gate's baseline is refreshed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from hetplan.perf.points import estimate_points
from hetplan.perf.points_table import COLUMNS

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "perf"


def test_median_error_on_held_out_models_stays_below_the_stored_threshold() -> None:
    with (FIXTURE / "silicon_validation_sample.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    limits = json.loads((FIXTURE / "fidelity_threshold.json").read_text())
    assert len(rows) == limits["rows"]
    out = estimate_points([{k: r[k] for k in COLUMNS if k in r} for r in rows])
    assert all("error" not in o for o in out), [o["error"] for o in out if "error" in o][:3]
    ttft = np.array([o["ttft_s"] * 1e3 / float(r["ttft_ms"]) - 1 for o, r in zip(out, rows, strict=True)])
    tpot = np.array([o["tpot_s"] * 1e3 / float(r["tpot_ms"]) - 1 for o, r in zip(out, rows, strict=True)])
    assert float(np.median(np.abs(ttft))) <= limits["ttft_median_abs_max"]
    assert float(np.median(np.abs(tpot))) <= limits["tpot_median_abs_max"]
