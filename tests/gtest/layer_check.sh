#!/usr/bin/env bash
# layer_check.sh LAYER_TEST: the GoogleTest layer's outputs and environment, from outside the
# binary (tests/gtest/layer_test.cpp linked with oomguard::gtest_main):
# - each test's report in OOMGUARD_REPORT_DIR matches oomguard.report/1, the OOM test's says
#   so; the phases' figures are properties of gtest's XML, which junitparser reads;
# - OOMGUARD_ALLOC_CONF reaches LibTorch's variable; OOMGUARD_CARD sets the capacity;
# - bad OOMGUARD_* values stop the binary with exit code 2 and a message naming them.
set -euo pipefail
binary=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The report folder is made when it is missing.
OOMGUARD_REPORT_DIR="$tmp/reports" "$binary" --gtest_output="xml:$tmp/layer.xml" \
  > "$tmp/out.txt" 2>&1 || { cat "$tmp/out.txt"; fail "the layer's tests failed"; }
ls "$tmp/reports"
grep -q "\[ oomguard \] LayerTest.SeedsCountUpPerTest seed [0-9]* (OOMGUARD_SEED=" "$tmp/out.txt" ||
  { cat "$tmp/out.txt"; fail "the seed is not printed"; }
for test in MeasureReportsStartPeakAndEnd OutOfMemoryFailsTheTestNamingThePhase \
    BudgetsAreDataAcceptedThenChecked; do
  [ -s "$tmp/reports/LayerTest.$test.json" ] || fail "no report for LayerTest.$test"
done
"$here/../cli/check_outputs.sh" "$tmp"/reports/*.json "$tmp/layer.xml"
python3 - "$tmp" <<'PY'
import json, sys, xml.etree.ElementTree as ET
tmp = sys.argv[1]
oom = json.load(open(f"{tmp}/reports/LayerTest.OutOfMemoryFailsTheTestNamingThePhase.json"))
assert oom["outcome"] == "oom" and oom["oom"]["phase"] == "generate", oom
assert oom["test"]["name"] == "LayerTest.OutOfMemoryFailsTheTestNamingThePhase", oom["test"]
budget = json.load(open(f"{tmp}/reports/LayerTest.BudgetsAreDataAcceptedThenChecked.json"))
statuses = [p["status"] for p in budget["phases"]]
assert statuses == ["pass", "budget_exceeded"], statuses
assert budget["outcome"] == "budget_exceeded", budget["outcome"]
assert budget["phases"][0]["budget_bytes"] > budget["phases"][0]["peak_allocated_bytes"]
props = {p.get("name"): p.get("value") for p in ET.parse(f"{tmp}/layer.xml").iter("property")}
peak = int(props["oomguard.scratch.peak_allocated_bytes"])
start = int(props["oomguard.scratch.start_allocated_bytes"])
assert peak - start >= 4 << 20, (start, peak)
assert props["oomguard.scratch.meter"] == "cpu"
print("ok: reports and XML properties")
PY

# Run twice in one process: the report holds the second run's phase only.
mkdir "$tmp/repeat"
OOMGUARD_REPORT_DIR="$tmp/repeat" "$binary" --gtest_repeat=2 \
  --gtest_filter=LayerTest.MeasureReportsStartPeakAndEnd > "$tmp/repeat.txt" 2>&1 ||
  { cat "$tmp/repeat.txt"; fail "--gtest_repeat=2"; }
python3 - "$tmp/repeat/LayerTest.MeasureReportsStartPeakAndEnd.json" <<'PY'
import json, sys
phases = json.load(open(sys.argv[1]))["phases"]
assert len(phases) == 1, f"{len(phases)} phases after --gtest_repeat=2"
print("ok: a repeated test's report holds its last run")
PY
copies=$(find "$tmp/repeat" -name 'LayerTest.MeasureReportsStartPeakAndEnd.seed-*.json' | wc -l)
[ "$copies" = 2 ] || { ls "$tmp/repeat"; fail "$copies per-seed reports after two runs, not 2"; }
echo "ok: each run's seed has its report"

# OOMGUARD_NAME_OPERATORS=0: what is live outside every tag stays "(untagged)", so the test
# that expects operator names fails, and its report says "(untagged)".
rc=0
OOMGUARD_NAME_OPERATORS=0 OOMGUARD_REPORT_DIR="$tmp/unnamed" "$binary" \
  --gtest_filter=LayerTest.UntaggedAllocationsAreNamedByTheirOperator > "$tmp/unnamed.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/unnamed.txt"; fail "OOMGUARD_NAME_OPERATORS=0: exit $rc, expected 1"; }
grep -q '"(untagged)"' "$tmp/unnamed/LayerTest.UntaggedAllocationsAreNamedByTheirOperator.json" ||
  fail "OOMGUARD_NAME_OPERATORS=0 still names operators"
echo "ok: OOMGUARD_NAME_OPERATORS=0 leaves untagged allocations (untagged)"

# Budgets of a phase the test no longer measures: listed when checking, removed with
# OOMGUARD_ACCEPT=prune (and only then), for this run's device key only.
cat > "$tmp/budgets.json" <<'JSON'
{"schema": "oomguard.budgets/1", "headroom": 0.1, "budgets": {
  "LayerTest.MeasureReportsStartPeakAndEnd": {"scratch": {"cpu": "8MiB"}, "gone": {"cpu": "1MiB"},
    "on_a_gpu": {"cuda:t4": "1MiB"}, "mixed": {"cpu": "1MiB", "cuda": "2MiB"}},
  "Other.Test": {"gone": {"cpu": "1MiB"}}}}
JSON
one=--gtest_filter=LayerTest.MeasureReportsStartPeakAndEnd
OOMGUARD_BUDGETS="$tmp/budgets.json" "$binary" "$one" > "$tmp/stale.txt" 2>&1 ||
  { cat "$tmp/stale.txt"; fail "the stale-budget run"; }
grep -q "LayerTest.MeasureReportsStartPeakAndEnd has cpu budgets for phases it no longer measures: gone, mixed (OOMGUARD_ACCEPT=prune removes them)" \
  "$tmp/stale.txt" || { cat "$tmp/stale.txt"; fail "the stale budget is not listed"; }
grep -q '"gone"' "$tmp/budgets.json" || fail "checking removed a budget"
OOMGUARD_BUDGETS="$tmp/budgets.json" OOMGUARD_ACCEPT=prune "$binary" "$one" > "$tmp/prune.txt" 2>&1 ||
  { cat "$tmp/prune.txt"; fail "the prune run"; }
# A phase that ran out of memory keeps its budget in the report.
cat > "$tmp/oom-budgets.json" <<'JSON'
{"schema": "oomguard.budgets/1", "headroom": 0.1, "budgets": {
  "LayerTest.OutOfMemoryFailsTheTestNamingThePhase": {"generate": {"cpu": "3MiB"}}}}
JSON
OOMGUARD_BUDGETS="$tmp/oom-budgets.json" OOMGUARD_REPORT_DIR="$tmp/oom" "$binary" \
  --gtest_filter=LayerTest.OutOfMemoryFailsTheTestNamingThePhase > "$tmp/oom.txt" 2>&1 ||
  { cat "$tmp/oom.txt"; fail "the OOM test with a budgets file"; }
python3 - "$tmp/budgets.json" "$tmp/oom/LayerTest.OutOfMemoryFailsTheTestNamingThePhase.json" <<'PY'
import json, sys
phase = json.load(open(sys.argv[2]))["phases"][0]
assert phase["status"] == "oom" and phase["budget_bytes"] == 3 << 20, phase
print("ok: an out-of-memory phase's report has its budget")
b = json.load(open(sys.argv[1]))["budgets"]
mine = b["LayerTest.MeasureReportsStartPeakAndEnd"]
assert sorted(mine) == ["mixed", "on_a_gpu", "scratch"], b  # other devices' budgets stay
assert mine["mixed"] == {"cuda": "2MiB"}, mine
assert "gone" in b["Other.Test"], "a test that did not run here lost its budgets"
print("ok: a stale budget is listed, and removed with OOMGUARD_ACCEPT=prune only")
PY

OOMGUARD_ALLOC_CONF=expandable_segments:True "$binary" \
  --gtest_filter=LayerTest.AllocConfReachesLibTorchsVariable > "$tmp/conf.txt" 2>&1 ||
  { cat "$tmp/conf.txt"; fail "OOMGUARD_ALLOC_CONF"; }
grep -q "1 test.*PASSED\|PASSED.*1 test" "$tmp/conf.txt" || { cat "$tmp/conf.txt"; fail "not run"; }
OOMGUARD_CARD=t4 "$binary" --gtest_filter=LayerTest.EmulatedCardFromTheEnvironment \
  > "$tmp/card.txt" 2>&1 || { cat "$tmp/card.txt"; fail "OOMGUARD_CARD"; }
grep -q "PASSED.*1 test" "$tmp/card.txt" || { cat "$tmp/card.txt"; fail "not run"; }
OOMGUARD_CARD=t4 OOMGUARD_ALLOCATOR_MODEL=none "$binary" \
  --gtest_filter=LayerTest.EmulatedCardFromTheEnvironment > "$tmp/card.txt" 2>&1 ||
  { cat "$tmp/card.txt"; fail "OOMGUARD_ALLOCATOR_MODEL=none"; }
grep -q "PASSED.*1 test" "$tmp/card.txt" || { cat "$tmp/card.txt"; fail "not run"; }

expect_2() {  # expect_2 NAME=VALUE TEXT [NAME=VALUE...]: the binary exits 2 and says TEXT
  rc=0
  env "${@:3}" "$1" "$binary" > "$tmp/bad.txt" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { cat "$tmp/bad.txt"; fail "$1: exit $rc, expected 2"; }
  grep -qF "$2" "$tmp/bad.txt" || { cat "$tmp/bad.txt"; fail "$1: no '$2'"; }
  echo "ok: $1 -> exit 2: $(head -n 1 "$tmp/bad.txt")"
}
expect_2 OOMGUARD_CAPACITY=12XB "OOMGUARD_CAPACITY: "
expect_2 OOMGUARD_CARD=Z9 "OOMGUARD_CARD: "
expect_2 OOMGUARD_DEVICE=tpu "OOMGUARD_DEVICE: device tpu: expected auto, cpu, cuda, cuda:N"
# cuda:N narrows the binary to that device (a start again); one past those visible is refused,
# saying why (no device here, or how many there are).
expect_2 OOMGUARD_DEVICE=cuda:9999 "OOMGUARD_DEVICE: device cuda:9999: "
expect_2 OOMGUARD_ALLOC_CONF=no_such_key:1 "OOMGUARD_ALLOC_CONF: "
expect_2 OOMGUARD_ALLOCATOR_MODEL=gpu "OOMGUARD_ALLOCATOR_MODEL=gpu: expected cuda or none"
expect_2 OOMGUARD_PREDICT=t4 "OOMGUARD_PREDICT adds cards and settings to the prediction of"
expect_2 OOMGUARD_PREDICT="t4; z9 expandable_segments:True" \
  'OOMGUARD_PREDICT entry "z9 expandable_segments:True": "z9" is neither a card' OOMGUARD_CARD=t4
expect_2 OOMGUARD_PREDICT="t4 no_such_key:1" 'OOMGUARD_PREDICT entry "t4 no_such_key:1": ' \
  OOMGUARD_CARD=t4
expect_2 OOMGUARD_RULES=flash "OOMGUARD_RULES: unknown rule \"flash\"" OOMGUARD_CARD=t4
expect_2 OOMGUARD_THREADS=two "OOMGUARD_THREADS=two: expected a whole number"
echo "ok: the GoogleTest layer"
