#!/usr/bin/env bash
# plot_check.sh OOMGUARD: `oomguard plot` checked in a real renderer. A short run's trace and
# report are drawn to SVG and HTML; rsvg-convert rasterises the SVG, and the PNG must have
# the canvas size, not be blank, and show each budget as a red dashed line at the height its
# value has on the picture's own size axis; the HTML holds the same SVG and nothing that
# loads or runs. A trace that runs out of memory is marked. A repeat summary is drawn as one
# panel per phase, a dot per seed, its budget dashed at its height. Exit 77 (ctest: skipped) without
# rsvg-convert or the checkers' venv (ci/setup.sh installs both).
set -u
cli=$1
command -v rsvg-convert > /dev/null || { echo "skipped: no rsvg-convert (librsvg2-bin)"; exit 77; }
[ -x "${OOMGUARD_TOOLS_BIN:-}/python" ] || { echo "skipped: no checkers' venv"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run --set train.steps=3 --trace "$dir/t.jsonl" --report "$dir/r.json" > /dev/null 2>&1 ||
  { echo "FAIL: the run"; exit 1; }
"$cli" plot "$dir/t.jsonl" --run-report "$dir/r.json" -o "$dir/run.svg" || exit 1
"$cli" plot "$dir/t.jsonl" --run-report "$dir/r.json" -o "$dir/run.html" > /dev/null || exit 1
"$cli" plot "$here/../sim/traces/fragmentation.jsonl" --capacity 120MiB -o "$dir/frag.svg" \
  > /dev/null || exit 1
rsvg-convert "$dir/run.svg" -o "$dir/run.png" || { echo "FAIL: rsvg-convert refused the SVG"; exit 1; }
rsvg-convert "$dir/frag.svg" -o "$dir/frag.png" || exit 1
"$cli" replay "$here/../sim/traces/fragmentation.jsonl" --capacity 120MiB \
  --report "$dir/frag_replay.json" > /dev/null 2>&1
"$cli" plot "$dir/frag_replay.json" -o "$dir/frag_again.svg" > /dev/null || exit 1
cmp -s "$dir/frag.svg" "$dir/frag_again.svg" ||
  { echo "FAIL: a replay report draws otherwise than its trace, card and settings"; exit 1; }
"$cli" repeat -n 3 --set train.steps=1 --set evaluate.batches=1 --set generate.max_new_tokens=4 \
  --report "$dir/repeat.json" > /dev/null 2>&1 || { echo "FAIL: repeat"; exit 1; }
"$cli" plot "$dir/repeat.json" -o "$dir/repeat.svg" > /dev/null || exit 1
rsvg-convert "$dir/repeat.svg" -o "$dir/repeat.png" || exit 1
"$OOMGUARD_TOOLS_BIN/python" - "$dir" <<'PY'
import json, re, sys
import xml.etree.ElementTree as ET
from PIL import Image

d = sys.argv[1]
NS = {"s": "http://www.w3.org/2000/svg"}
report = json.load(open(f"{d}/r.json"))
svg = ET.parse(f"{d}/run.svg").getroot()
img = Image.open(f"{d}/run.png").convert("RGB")
W, H = img.size
px = img.load()

def is_red(c):  # the budget colour, #d62728, as antialiased
    return c[0] > 170 and c[1] < 110 and c[2] < 110

# The picture's own size axis: two ticks give bytes -> y.
ticks = sorted((int(t.get("data-bytes")), float(t.get("y")) - 4)
               for t in svg.iterfind(".//s:text[@class='tick']", NS))
(b0, y0), (b1, y1) = ticks[0], ticks[-1]
y_of = lambda b: y0 + (y1 - y0) * (b - b0) / (b1 - b0)
non_white = sum(1 for x in range(0, W, 2) for y in range(0, H, 2) if px[x, y] != (255, 255, 255))
checks = {"the canvas is 1200 x 560": (W, H) == (1200, 560),
          "not blank (over 5% of it drawn)": non_white > 0.05 * (W // 2) * (H // 2)}
budgets = {p["name"]: p["budget_bytes"] for p in report["phases"]}
for line in svg.iterfind(".//s:line[@class='budget']", NS):
    phase, b = line.get("data-phase"), int(line.get("data-bytes"))
    y, xa, xb = float(line.get("y1")), float(line.get("x1")), float(line.get("x2"))
    row = round(y)
    red = sum(is_red(px[x, row]) or is_red(px[x, row - 1]) for x in range(int(xa) + 1, int(xb)))
    below = sum(is_red(px[x, row + 6]) for x in range(int(xa) + 1, int(xb)))  # its label is above
    checks[f"{phase}: the budget is the report's"] = budgets.get(phase) == b
    checks[f"{phase}: drawn at its height on the axis"] = abs(y_of(b) - y) < 1.0
    checks[f"{phase}: red dashes along it in the PNG"] = red > 0.5 * (xb - xa - 1) and below < 3
checks["a budget line per phase"] = len(list(svg.iterfind(".//s:line[@class='budget']", NS))) == len(budgets)
html = open(f"{d}/run.html").read()
checks["the HTML holds the same SVG"] = open(f"{d}/run.svg").read() in html
checks["nothing loads or runs"] = not re.search(r"<script|href=|src=|url\(|@import", html)
frag = ET.parse(f"{d}/frag.svg").getroot()
oom = frag.find(".//s:line[@class='oom']", NS)
checks["the OOM is marked"] = oom is not None and any(
    "out of memory: 60MiB in train" in (t.text or "") for t in frag.iterfind(".//s:text", NS))
rep = json.load(open(f"{d}/repeat.json"))
rsvg = ET.parse(f"{d}/repeat.svg").getroot()
rimg = Image.open(f"{d}/repeat.png").convert("RGB")
rpx = rimg.load()
seeds = list(rsvg.iterfind(".//s:circle[@class='seed']", NS))
checks["repeat: a dot per seed and phase"] = len(seeds) == 3 * len(rep["iterations"][0]["phases"])
for line in rsvg.iterfind(".//s:line[@class='budget']", NS):
    phase, b = line.get("data-phase"), int(line.get("data-bytes"))
    t = sorted((int(e.get("data-bytes")), float(e.get("y")) - 4)
               for e in rsvg.iterfind(f".//s:text[@class='tick'][@data-phase='{phase}']", NS))
    (c0, z0), (c1, z1) = t[0], t[-1]
    y = float(line.get("y1"))
    row = round(y)
    red = sum(is_red(rpx[x, row]) or is_red(rpx[x, row - 1]) for x in range(100, 1160))
    checks[f"repeat {phase}: budget at its height, red in the PNG"] = (
        b == budgets[phase] and abs(z0 + (z1 - z0) * (b - c0) / (c1 - c0) - y) < 1.0
        and red > 500)
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: " + "; ".join(bad) if bad else "ok: " + "; ".join(checks))
sys.exit(1 if bad else 0)
PY
