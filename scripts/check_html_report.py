"""Open an HTML report in headless Chromium and check that it renders: no page errors, every chart present and
drawn. Exit 0 when it does, 1 when it does not, 2 when no Chromium is installed.

Usage: python scripts/check_html_report.py REPORT.html [--screenshot OUT.png]
Chromium comes from Debian (`apt-get install chromium`) or the path in $CHROMIUM.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def chromium() -> str | None:
    """Path of a Chromium binary, or None."""
    return os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def check(report: Path, screenshot: Path | None = None) -> list[str]:
    """Problems found while rendering ``report`` (empty when it renders correctly)."""
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found; install it (apt-get install chromium) or set $CHROMIUM")
    problems = []
    expected = len(re.findall(r'<div class="chart"', report.read_text(encoding="utf-8")))
    with tempfile.TemporaryDirectory() as profile:
        url = report.resolve().as_uri()
        dom = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if dom.returncode != 0:
            problems.append(f"chromium exited {dom.returncode}: {dom.stderr[-500:]}")
        for line in dom.stderr.splitlines():
            if "CONSOLE" in line or "Uncaught" in line:
                problems.append(f"page error: {line.strip()}")
        charts = re.findall(r'<div class="chart"[^>]*>\s*<svg', dom.stdout)
        if expected == 0 or len(charts) != expected:
            problems.append(f"expected {expected} charts as inline SVG in the rendered DOM, found {len(charts)}")
        shot = screenshot or Path(profile) / "shot.png"
        run = subprocess.run(
            [binary, *FLAGS, f"--user-data-dir={profile}", "--window-size=1200,2400", f"--screenshot={shot}", url],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if run.returncode != 0 or not shot.exists():
            problems.append(f"no screenshot: {run.stderr[-500:]}")
        else:
            problems += _check_pixels(shot)
    return problems


def _check_pixels(png: Path) -> list[str]:
    import matplotlib.image as mpimg
    import numpy as np

    img = mpimg.imread(png)[..., :3]
    coloured = np.abs(img - img.mean(axis=2, keepdims=True)).max(axis=2) > 0.15  # chart bars and lines
    share = float(coloured.mean())
    return (
        [] if share > 0.01 else [f"the screenshot is nearly colourless ({share:.2%} coloured pixels): charts not drawn"]
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path)
    ap.add_argument("--screenshot", type=Path)
    args = ap.parse_args()
    try:
        problems = check(args.report, args.screenshot)
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 2
    for p in problems:
        print(f"problem: {p}")
    print("ok: the report renders in headless Chromium with all its charts" if not problems else "FAILED")
    return 0 if not problems else 1


if __name__ == "__main__":
    raise SystemExit(main())
