#!/usr/bin/env bash
# prediction_check.sh PREDICTION_TEST OOMGUARD: the GoogleTest layer predicting a card on CPU
# (tests/gtest/prediction_test.cpp, a small MLP of its own, linked with oomguard::gtest_main):
# - OOMGUARD_CARD=t4 with two more targets in OOMGUARD_PREDICT: the tests pass, each report
#   matches oomguard.report/1 and lists the predictions with the workspace rule, and each
#   phase's figures are printed;
# - a capacity between the predicted allocated and reserved peaks fails the test as the card
#   would, naming the phase;
# - an evaluation-only test predicts the same run alone and after the training test (both
#   cuBLAS workspaces taken before the first phase, the cache emptied before each test);
# - OOMGUARD_RULES=none: the rule's bytes leave the prediction (it is what adds them); without
#   the cpu_scratch rule a convolution's CPU scratch is predicted again;
# - a measure_steps() phase's steps searched in other orders: the worst order found, run as
#   given (measure_steps with an order), reserves what its replay did, to the byte; a capacity
#   the order run fits with its margin and the worst order does not fails
#   EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER naming that order; OOMGUARD_ORDERS=0 fails it saying so;
# - `oomguard plot` draws a test's report with the predicted reserved line, at its height on
#   the picture's own axis once rasterised (rsvg-convert; skipped without it).
set -euo pipefail
binary=$1
cli=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
train=Prediction.TrainStepIsPredictedForTheCardWithTheWorkspaceRule

mkdir "$tmp/t4"
OOMGUARD_CARD=t4 OOMGUARD_PREDICT="t4 expandable_segments:True; 12MiB" \
  OOMGUARD_REPORT_DIR="$tmp/t4" "$binary" > "$tmp/t4.txt" 2>&1 ||
  { cat "$tmp/t4.txt"; fail "the prediction tests failed on t4"; }
grep -q "PASSED.*13 tests" "$tmp/t4.txt" || { cat "$tmp/t4.txt"; fail "not all 13 tests ran"; }
grep -F "[ oomguard ] $train train: peak " "$tmp/t4.txt" ||
  { cat "$tmp/t4.txt"; fail "no figures printed for the train phase"; }
"$here/../cli/check_outputs.sh" "$tmp"/t4/*.json
read -r allocated reserved < <(python3 - "$tmp/t4/$train.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["device_info"]["allocator_model"] == "cuda", report["device_info"]
phase = report["phases"][0]
labels = [p["label"] for p in phase["predictions"]]
assert labels == ["t4", "t4 expandable_segments:True", "12MiB"], labels
t4 = phase["predictions"][0]
assert t4["fits"] and t4["rules"][0]["name"] == "cublas_workspace", t4
assert t4["rules"][0]["bytes"] == 2 * 8519680, t4["rules"]
assert phase["peak_reserved_bytes"] == t4["peak_reserved_bytes"] > phase["peak_allocated_bytes"]
assert not phase["predictions"][2]["fits"], phase["predictions"][2]
# The 12MiB card has no room for a workspace: refused in this first phase, not before it.
assert not phase["predictions"][2]["oom"].startswith("ran out of memory earlier"), phase["predictions"][2]
print(t4["peak_allocated_bytes"], t4["peak_reserved_bytes"])
PY
)
echo "ok: t4 predicted allocated $allocated, reserved $reserved"
# The evaluation alone in its process: the same figures as after the training test above.
evaluation=Prediction.AnEvaluationMeasuresTheSameAloneOrAfterTraining
mkdir "$tmp/alone"
OOMGUARD_CARD=t4 OOMGUARD_PREDICT="t4 expandable_segments:True; 12MiB" \
  OOMGUARD_REPORT_DIR="$tmp/alone" "$binary" --gtest_filter="$evaluation" > "$tmp/alone.txt" 2>&1 ||
  { cat "$tmp/alone.txt"; fail "the evaluation alone failed"; }
python3 - "$tmp/t4/$evaluation.json" "$tmp/alone/$evaluation.json" <<'PY'
import json, sys
after, alone = (json.load(open(path))["phases"][0]["predictions"][0] for path in sys.argv[1:])
for key in ("peak_allocated_bytes", "peak_reserved_bytes", "rules"):
    assert after[key] == alone[key], (key, "after training", after[key], "alone", alone[key])
print(f"ok: the evaluation predicts {alone['peak_allocated_bytes']} B allocated, "
      f"{alone['peak_reserved_bytes']} B reserved, alone and after training")
PY
# The schema holds predictions to their shape: each change to REPORT's first prediction (`p`,
# and its `o`rders) must be rejected.
schema_rejects() {
  local report=$1 change
  shift
  for change in "$@"; do
    python3 - "$report" "$tmp/broken.json" "$change" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["phases"][0]["predictions"][0]
o = p.get("orders")
exec(sys.argv[3])
json.dump(d, open(sys.argv[2], "w"))
PY
    local rc=0
    "$here/../cli/check_outputs.sh" "$tmp/broken.json" > "$tmp/broken.txt" 2>&1 || rc=$?
    [ "$rc" = 1 ] || { cat "$tmp/broken.txt"; fail "the schema accepted: $change"; }
    echo "ok: the schema rejects $change"
  done
}
schema_rejects "$tmp/t4/$train.json" "p['fits'] = False" "del p['rules']" "p['rules'][0]['name'] = 'flash'"
python3 - "$tmp/t4/Prediction.BudgetsOfTheCardComeFromThePrediction.json" <<'PY'
import json, sys
phase = json.load(open(sys.argv[1]))["phases"][0]
assert phase["budget_key"] == "cuda:t4", phase["budget_key"]
assert phase["budget_checked_against"] == "predicted", phase
print("ok: the budget's key and figure are the card's prediction")
PY

# The test's report drawn: the reserved line at the predicted peak's height.
"$cli" plot "$tmp/t4/$train.json" -o "$tmp/train.svg" > /dev/null
if command -v rsvg-convert > /dev/null && [ -x "${OOMGUARD_TOOLS_BIN:-}/python" ]; then
  rsvg-convert "$tmp/train.svg" -o "$tmp/train.png"
  "$OOMGUARD_TOOLS_BIN/python" - "$tmp/train.svg" "$tmp/train.png" "$reserved" <<'PY'
import sys
import xml.etree.ElementTree as ET
from PIL import Image
svg, png, reserved = ET.parse(sys.argv[1]).getroot(), Image.open(sys.argv[2]).convert("RGB"), int(sys.argv[3])
NS = {"s": "http://www.w3.org/2000/svg"}
ticks = sorted((int(t.get("data-bytes")), float(t.get("y")) - 4)
               for t in svg.iterfind(".//s:text[@class='tick']", NS))
(b0, y0), (b1, y1) = ticks[0], ticks[-1]
y = round(y0 + (y1 - y0) * (reserved - b0) / (b1 - b0))
px = png.load()
orange = lambda c: c[0] > 200 and 90 < c[1] < 170 and c[2] < 80  # #ff7f0e, antialiased
rows = [r for r in range(y - 2, y + 3)
        if sum(orange(px[x, r]) for x in range(100, png.size[0] - 40)) > 200]
assert rows, f"no reserved line at y {y} ({reserved} B)"
assert "reserved (predicted for t4)" in open(sys.argv[1]).read()
print(f"ok: the plot's reserved line is at the predicted {reserved} B (y {y})")
PY
else
  echo "skipped: rasterising the plot (no rsvg-convert or checkers' venv)"
fi

# Between the predicted allocated and reserved peaks: the CPU bytes would fit, the card not.
capacity=$(( (allocated + reserved) / 2 ))
rc=0
OOMGUARD_CAPACITY=$capacity OOMGUARD_REPORT_DIR="$tmp" "$binary" --gtest_filter="$train" \
  > "$tmp/between.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/between.txt"; fail "capacity $capacity: exit $rc, expected 1"; }
grep -F "phase train of $train would run out of memory on " "$tmp/between.txt" ||
  { cat "$tmp/between.txt"; fail "capacity $capacity: no predicted OOM naming the phase"; }
[ "$(grep -c "would run out of memory on" "$tmp/between.txt")" = 1 ] ||
  { cat "$tmp/between.txt"; fail "capacity $capacity: the OOM is not reported exactly once"; }
grep -qF "CUDA out of memory. Tried to allocate" "$tmp/between.txt" ||
  { cat "$tmp/between.txt"; fail "capacity $capacity: not LibTorch's message"; }
grep -qF "live at the peak, by tag:" "$tmp/between.txt" ||
  { cat "$tmp/between.txt"; fail "capacity $capacity: what was live is not listed"; }
python3 - "$tmp/$train.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
assert report["outcome"] == "oom" and report["oom"]["phase"] == "train", report["oom"]
assert report["oom"]["predicted"] is True, report["oom"]
print("ok: a capacity between the predicted peaks is a predicted OOM in phase train")
PY

# The steps of a measure_steps() phase in other orders (batches of different sizes).
orders=Prediction.TheStepsOfAPhaseAreSearchedInOtherOrders
read -r recorded highest order < <(python3 - "$tmp/t4/$orders.json" <<'PY'
import json, sys
predictions = json.load(open(sys.argv[1]))["phases"][0]["predictions"]
t4, expandable = predictions[0], predictions[1]
o = t4["orders"]
assert o["searched"] and 3 < o["orders_tried"] <= 32, o
assert o["recorded_reserved_bytes"] == t4["peak_reserved_bytes"], (o, t4["peak_reserved_bytes"])
assert o["highest_reserved_bytes"] > o["recorded_reserved_bytes"], o
print(o["recorded_reserved_bytes"], o["highest_reserved_bytes"], ",".join(map(str, o["highest_order"])))
e = expandable["orders"]
print(f"t4 expandable_segments:True: reserved {e['lowest_reserved_bytes']} .. {e['highest_reserved_bytes']} B "
      "over the orders tried", file=sys.stderr)
PY
)
echo "ok: t4, the order run reserves $recorded B; the order $order of its steps $highest B"
mkdir "$tmp/worst"
OOMGUARD_CARD=t4 PREDICTION_ORDER="${order//,/ }" OOMGUARD_REPORT_DIR="$tmp/worst" "$binary" \
  --gtest_filter="$orders" > "$tmp/worst.txt" 2>&1 || { cat "$tmp/worst.txt"; fail "the worst order, run"; }
python3 - "$tmp/worst/$orders.json" "$highest" <<'PY'
import json, sys
t4 = json.load(open(sys.argv[1]))["phases"][0]["predictions"][0]
assert t4["peak_reserved_bytes"] == int(sys.argv[2]), (t4["peak_reserved_bytes"], sys.argv[2])
print(f"ok: run in that order, the phase reserves {t4['peak_reserved_bytes']} B, as its replay did")
PY
rc=0
OOMGUARD_CAPACITY=$highest PREDICTION_MARGIN=10% "$binary" --gtest_filter="$orders" \
  > "$tmp/any-order.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/any-order.txt"; fail "capacity $highest, 10%: exit $rc, expected 1"; }
grep -F "phase train of $orders does not fit in every order of its steps with a margin of 10%:" "$tmp/any-order.txt" &&
  grep -F "in the order ${order//,/, } of its steps (the order run: " "$tmp/any-order.txt" &&
  grep -F "measure_steps(\"train\", {${order//,/, }}, step) runs it" "$tmp/any-order.txt" ||
  { cat "$tmp/any-order.txt"; fail "capacity $highest: the failure does not name the worst order"; }
rc=0
OOMGUARD_CARD=t4 OOMGUARD_ORDERS=0 PREDICTION_MARGIN=10% "$binary" --gtest_filter="$orders" \
  > "$tmp/no-orders.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -qF "no orders of its steps were searched for t4: OOMGUARD_ORDERS=0" "$tmp/no-orders.txt" ||
  { cat "$tmp/no-orders.txt"; fail "OOMGUARD_ORDERS=0: exit $rc, or the assertion does not say why"; }
rc=0
OOMGUARD_CARD=t4 OOMGUARD_ORDERS=many "$binary" --gtest_filter="$orders" > "$tmp/bad-orders.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -qF "OOMGUARD_ORDERS=many: expected a whole number" "$tmp/bad-orders.txt" ||
  { cat "$tmp/bad-orders.txt"; fail "OOMGUARD_ORDERS=many: exit $rc"; }
echo "ok: EXPECT_PHASE_FITS_CARD_IN_ANY_ORDER fails naming the worst order, or saying none was searched"
schema_rejects "$tmp/t4/$orders.json" "o['highest_order'] = []" "del o['recorded_reserved_bytes']" \
  "o['searched'] = False"

# The Meta device: a model made on device(), one of torch::nn modules moved there with
# to(device()), and one made with make_on_device() (on Meta under MakeOnMeta), each predicted
# from its shapes alone as on the CPU.
made=Prediction.AModelMadeOnTheDeviceIsPredictedFromItsShapes
moved=Prediction.AModelMovedToTheDeviceIsPredictedFromItsShapes
made_for=Prediction.AModelMadeWithMakeOnDeviceIsPredictedFromItsShapes
mkdir "$tmp/meta" "$tmp/cpu"
for where in cpu meta; do
  OOMGUARD_DEVICE=$where OOMGUARD_CARD=t4 OOMGUARD_REPORT_DIR="$tmp/$where" "$binary" \
    --gtest_filter="$made:$moved:$made_for" > "$tmp/$where.txt" 2>&1 ||
    { cat "$tmp/$where.txt"; fail "$made:$moved:$made_for on $where"; }
done
for shapes in "$made" "$moved" "$made_for"; do
"$here/../cli/check_outputs.sh" "$tmp/meta/$shapes.json" > /dev/null
python3 - "$tmp/cpu/$shapes.json" "$tmp/meta/$shapes.json" <<'PY'
import json, sys
cpu, meta = (json.load(open(p)) for p in sys.argv[1:])
assert meta["device"] == "meta" and cpu["device"] == "cpu", (cpu["device"], meta["device"])
a, b = cpu["phases"][0]["predictions"][0], meta["phases"][0]["predictions"][0]
# Within gpu-sanity's tolerances (1% + 1 MiB): the CPU's kernels allocate scratch buffers no
# Meta kernel does.
for key in ("peak_allocated_bytes", "peak_reserved_bytes"):
    assert abs(a[key] - b[key]) <= 0.01 * a[key] + 2**20, (key, "cpu", a[key], "meta", b[key])
assert a["num_alloc_retries"] == b["num_alloc_retries"], (a, b)
print(f"ok: {sys.argv[1].split('/')[-1]}: OOMGUARD_DEVICE=meta predicts what the CPU does: t4 "
      f"allocated {b['peak_allocated_bytes']} B (CPU {a['peak_allocated_bytes']} B), reserved "
      f"{b['peak_reserved_bytes']} B (CPU {a['peak_reserved_bytes']} B)")
PY
done

# The workspace rule switched off: the prediction loses its two workspaces.
mkdir "$tmp/none"
OOMGUARD_CARD=t4 OOMGUARD_RULES=none OOMGUARD_REPORT_DIR="$tmp/none" "$binary" \
  --gtest_filter="$train" > "$tmp/none.txt" 2>&1 || true
python3 - "$tmp/none/$train.json" "$allocated" <<'PY'
import json, sys
t4 = json.load(open(sys.argv[1]))["phases"][0]["predictions"][0]
assert t4["rules"] == [], t4["rules"]
assert int(sys.argv[2]) - t4["peak_allocated_bytes"] == 2 * 8519680, (sys.argv[2], t4)
print("ok: OOMGUARD_RULES=none takes the workspaces' 2 x 8,519,680 B out")
PY
# The cpu_scratch rule switched off: the convolution's CPU scratch is in the prediction again.
scratch=Prediction.AConvolutionsCpuScratchIsLeftOut
if OOMGUARD_CARD=t4 OOMGUARD_RULES=cublas_workspace,sdpa_attention "$binary" \
  --gtest_filter="$scratch" > "$tmp/scratch.txt" 2>&1; then
  cat "$tmp/scratch.txt"; fail "$scratch passed without the cpu_scratch rule"
fi
grep -q "the prediction is not the output alone" "$tmp/scratch.txt" ||
  { cat "$tmp/scratch.txt"; fail "$scratch failed for another reason without the rule"; }
echo "ok: without the cpu_scratch rule the convolution's scratch is predicted"
echo "ok: prediction in the GoogleTest layer"
