"""Open an HTML report in headless Chromium and check that it renders: no page errors, every chart present and
drawn. Exit 0 when it does, 1 when it does not, 2 when no Chromium is installed.

Usage: python scripts/check_html_report.py REPORT.html [--screenshot OUT.png]
Chromium comes from Debian (`apt-get install chromium`) or the path in $CHROMIUM.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

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


# Appended to a copy of the report: records each chart's box (CSS pixels, page coordinates) and the page height on
# the root element, where --dump-dom shows it without changing the layout.
MEASURE = """<script>
(function () {
  var boxes = Array.prototype.map.call(document.querySelectorAll("div.chart svg"), function (svg) {
    var r = svg.getBoundingClientRect();
    return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];
  });
  var root = document.documentElement;
  root.setAttribute("data-chart-boxes", JSON.stringify(boxes));
  root.setAttribute("data-page-height", String(Math.ceil(root.scrollHeight)));
})();
</script>"""
WIDTH = 1200  # CSS pixels; device scale factor 1, so one CSS pixel is one screenshot pixel
MIN_COLOURED = 0.005  # share of a chart's box that must be coloured (bars, lines, markers) for it to count as drawn


def check(report: Path, screenshot: Path | None = None) -> list[str]:
    """Problems found while rendering ``report`` (empty when it renders correctly).

    Each chart is checked on its own: its SVG's box in the page is measured in Chromium, the whole page is
    screenshotted at its full height, and the box must hold at least ``MIN_COLOURED`` coloured pixels.
    """
    binary = chromium()
    if binary is None:
        raise FileNotFoundError("no Chromium found; install it (apt-get install chromium) or set $CHROMIUM")
    problems = []
    text = report.read_text(encoding="utf-8")
    expected = len(re.findall(r'<div class="chart"', text))
    with tempfile.TemporaryDirectory() as profile:
        measured = Path(profile) / "measured.html"
        measured.write_text(
            text.replace("</body>", MEASURE + "</body>") if "</body>" in text else text + MEASURE, encoding="utf-8"
        )
        base = [binary, *FLAGS, f"--user-data-dir={profile}", "--force-device-scale-factor=1"]
        url = report.resolve().as_uri()
        dom = subprocess.run(
            [*base, "--enable-logging=stderr", "--v=0", f"--window-size={WIDTH},2400", "--dump-dom", url],
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
        sized = subprocess.run(
            [*base, f"--window-size={WIDTH},2400", "--dump-dom", measured.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        boxes_attr = re.search(r'data-chart-boxes="([^"]*)"', sized.stdout)
        height_attr = re.search(r'data-page-height="(\d+)"', sized.stdout)
        if boxes_attr is None or height_attr is None:
            return problems + ["could not measure the charts' positions in the page"]
        boxes = json.loads(html.unescape(boxes_attr.group(1)))
        height = max(int(height_attr.group(1)), 1)  # + 400 below: headless windows lose some height to chrome
        shot = screenshot or Path(profile) / "shot.png"
        run = subprocess.run(
            [*base, f"--window-size={WIDTH},{height + 400}", f"--screenshot={shot}", measured.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if run.returncode != 0 or not shot.exists():
            problems.append(f"no screenshot: {run.stderr[-500:]}")
        else:
            problems += _check_pixels(shot, boxes)
    return problems


def _coloured(img: np.ndarray) -> np.ndarray:
    """Pixels far from grey: chart bars, lines and markers (text, axes and background are grey)."""
    import numpy as np

    return np.asarray(np.abs(img - img.mean(axis=2, keepdims=True)).max(axis=2) > 0.15)


def _check_pixels(png: Path, boxes: list[list[float]]) -> list[str]:
    """One problem per chart box (x, y, width, height in pixels) with too few coloured pixels."""
    import matplotlib.image as mpimg

    img = mpimg.imread(png)[..., :3]
    problems = []
    for i, (x, y, w, h) in enumerate(boxes, start=1):
        x0, y0 = max(int(x), 0), max(int(y), 0)
        x1, y1 = min(int(x + w), img.shape[1]), min(int(y + h), img.shape[0])
        if x1 <= x0 or y1 <= y0:
            problems.append(f"chart {i} lies outside the screenshot ({x:.0f},{y:.0f} {w:.0f}x{h:.0f})")
            continue
        share = float(_coloured(img[y0:y1, x0:x1]).mean())
        if share < MIN_COLOURED:
            problems.append(f"chart {i} is nearly colourless ({share:.2%} coloured pixels in its box): not drawn")
    return problems


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
