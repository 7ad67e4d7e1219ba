#!/usr/bin/env bash
# compare_check.sh OOMGUARD LAYER_TESTS CLI_FORKS: `oomguard compare` on real outputs, each
# compare run by CLI_FORKS (tests/cli/cli_forks.cpp, the command line in a process forked per
# call, LibTorch started once), the others by OOMGUARD.
# - Two folders of GoogleTest layer reports, the head's evaluate keeping every batch's logits
#   (tests/gtest/layer_test.cpp, OOMGUARD_LAYER_TEST_KEEP_LOGITS): exit 1 naming the test, the
#   phase, the tag and the growth; a second run of the base: exit 0, "no change".
# - Run reports, traces, snapshots, replay reports and repeat summaries of the default run
#   against one without the no_grad_eval guard: exit 1 naming evaluate.
# - The Markdown parses as a table (markdown-it-py, as GitHub renders tables); the JSON matches
#   harness/schemas/compare.schema.json; oomguard plot draws it (rsvg-convert renders it).
# - Swapped kinds, other seeds and bad files: exit 2, one line naming the file, nothing written.
set -euo pipefail
cli=$1
layer=$2
forks=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

coproc FORKS { "$forks" --stdout "$cli"; }
# expect CODE ARGS...: runs oomguard compare ARGS, which must exit CODE; its output (stdout and
# stderr) is in $out.
expect() {
  local want=$1 rc
  shift
  printf 'compare %s\n' "$*" >&"${FORKS[1]}"
  IFS=$'\t' read -r rc out <&"${FORKS[0]}" || fail "compare $*: oomguard_cli_forks stopped"
  out=${out//\\n/$'\n'}
  while [[ "$out" == *$'\n' ]]; do out=${out%$'\n'}; done
  [ "$rc" = "$want" ] || fail "compare $*: exit $rc, expected $want: $out"
}
has() { [[ "$out" == *"$1"* ]] || fail "no \"$1\" in: $out"; }

tests='LayerTest.TrainThenEvaluateForCompare:LayerTest.MeasureReportsStartPeakAndEnd'
layer_reports() {  # layer_reports DIR [ENV...]
  local dir=$1
  shift
  env OOMGUARD_SEED=0 OOMGUARD_REPORT_DIR="$dir" "$@" "$layer" --gtest_filter="$tests" \
    > "$dir.log" 2>&1 || { cat "$dir.log"; fail "the layer's tests failed"; }
}
layer_reports "$tmp/base"
layer_reports "$tmp/again"
layer_reports "$tmp/head" OOMGUARD_LAYER_TEST_KEEP_LOGITS=1
# A per-seed copy beside a test's report is not a test of its own.
cp "$tmp/head/LayerTest.TrainThenEvaluateForCompare.json" \
  "$tmp/head/LayerTest.TrainThenEvaluateForCompare.seed-0.json"

expect 0 "$tmp/base" "$tmp/again" --fail-above 0%
has "outcome: no change"
echo "ok: two runs of the same tests: no change"

expect 1 "$tmp/base" "$tmp/head" --fail-above 5% --markdown "$tmp/diff.md" --report "$tmp/diff.json"
has "over the limit 5%: LayerTest.TrainThenEvaluateForCompare evaluate +3MiB (+"
has "logits +3MiB"
has "outcome: 1 phase over the limit"
echo "ok: the kept logits named by test, phase, tag and growth"
# Within a limit of the phase's own: exit 0, the change still shown.
expect 0 "$tmp/base" "$tmp/head" --fail-above 5% --fail-above evaluate=400%
has "1 phase changed, none over the limit"

"$here/check_outputs.sh" "$tmp/diff.json"
"${OOMGUARD_TOOLS_BIN:?}/python" - "$tmp/diff.md" <<'PY'
import sys
from markdown_it import MarkdownIt
text = open(sys.argv[1]).read()
assert text.startswith("<!-- oomguard-memory-diff -->\n"), text[:80]
tokens = MarkdownIt("commonmark").enable("table").parse(text)
kinds = [t.type for t in tokens]
assert "table_open" in kinds, f"no table in:\n{text}"
rows, row = [], None
for t in tokens:
    if t.type == "tr_open":
        row = []
    elif t.type == "inline" and row is not None:
        row.append(t.content)
    elif t.type == "tr_close":
        rows.append(row)
        row = None
header, body = rows[0], rows[1:]
assert len(header) == 9 and header[3] == "peak allocated", header
assert all(len(r) == len(header) for r in body), rows
grown = [r for r in body if r[1] == "`LayerTest.TrainThenEvaluateForCompare`" and r[2] == "`evaluate`"]
assert grown and grown[0][0] == "**over 5%**" and grown[0][4] == "+3MiB", body
assert "`logits` +3MiB" in grown[0][8], grown
print(f"ok: the Markdown is a table of {len(body)} change(s)")
PY

if command -v rsvg-convert > /dev/null; then
  "$cli" plot "$tmp/diff.json" -o "$tmp/diff.svg" > /dev/null
  rsvg-convert "$tmp/diff.svg" -o "$tmp/diff.png" || fail "rsvg-convert refused the SVG"
  grep -q 'class="head over"' "$tmp/diff.svg" || fail "the grown phase is not drawn over its limit"
  echo "ok: base and head drawn in one picture"
fi

# The default run against the same run without the no_grad_eval guard: report, trace, snapshot.
short=(--set train.steps=2 --seed 0)
"$cli" run "${short[@]}" --report "$tmp/run-base.json" --trace "$tmp/base.jsonl" \
  --snapshot "$tmp/base.pickle" > /dev/null 2>&1
"$cli" run "${short[@]}" --disable-guard no_grad_eval --report "$tmp/run-head.json" \
  --trace "$tmp/head.jsonl" --snapshot "$tmp/head.pickle" > /dev/null 2>&1 || true
expect 1 "$tmp/run-base.json" "$tmp/run-head.json" --fail-above 5%
has "over the limit 5%: evaluate +"
has "differs: guards.no_grad_eval: true -> false"
expect 1 "$tmp/base.jsonl" "$tmp/head.jsonl" --fail-above 5%
has "over the limit 5%: evaluate +"
expect 0 "$tmp/base.pickle" "$tmp/base.pickle"
has "outcome: no change"
expect 0 "$tmp/base.pickle" "$tmp/head.pickle"
has "outcome: 1 phase changed"
# Frames matched without their line (the step here): "block3.mlp (evaluate)", not "(evaluate:7)".
has "block3.mlp (evaluate) +"
"$cli" replay "$tmp/base.jsonl" --card t4 --report "$tmp/replay-base.json" > /dev/null
"$cli" replay "$tmp/head.jsonl" --card t4 --report "$tmp/replay-head.json" > /dev/null
expect 1 "$tmp/replay-base.json" "$tmp/replay-head.json" --fail-above 5%
has "over the limit 5%: t4 default evaluate +"
"$cli" repeat -n 1 --report "$tmp/repeat-base.json" "${short[@]:0:2}" > /dev/null 2>&1
"$cli" repeat -n 1 --report "$tmp/repeat-head.json" "${short[@]:0:2}" \
  --disable-guard no_grad_eval > /dev/null 2>&1 || true
expect 1 "$tmp/repeat-base.json" "$tmp/repeat-head.json" --fail-above 5%
has "over the limit 5%: repeat evaluate +"
has "differs: run options: --set train.steps=2 -> --set train.steps=2 --disable-guard no_grad_eval"
"$here/check_outputs.sh" "$tmp/replay-base.json" "$tmp/repeat-base.json"
echo "ok: run reports, traces, snapshots, replay reports and repeat summaries"

# Inputs that cannot be compared: exit 2, one line naming the file, nothing written.
"$cli" run --set train.steps=2 --seed 1 --report "$tmp/run-seed1.json" > /dev/null 2>&1
head -c 300 "$tmp/run-base.json" > "$tmp/truncated.json"
echo '{"name": "not ours"}' > "$tmp/foreign.json"
sed 's|"oomguard.report/1"|"oomguard.report/2"|' "$tmp/run-base.json" > "$tmp/v2.json"
mkdir "$tmp/empty" "$tmp/foreign"
cp "$tmp/base"/*.json "$tmp/foreign/"
echo '[1, 2]' > "$tmp/foreign/Suite.Name.json"
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
for name, change in (("phases-object", lambda d: d.update(phases={})),
                     ("huge", lambda d: d["phases"][0].update(peak_allocated_bytes=1e30))):
    d = json.load(open(f"{tmp}/run-base.json"))
    change(d)
    json.dump(d, open(f"{tmp}/{name}.json", "w"))
PY
"$cli" replay "$tmp/head.jsonl" --card a100-40 --report "$tmp/replay-a100.json" > /dev/null
bad_cases=(
  "$tmp/run-base.json|$tmp/head|folder of test reports"
  "$tmp/run-base.json|$tmp/run-seed1.json|seed 0 vs 1"
  "$tmp/run-base.json|$tmp/truncated.json|truncated.json: not valid JSON"
  "$tmp/run-base.json|$tmp/foreign.json|foreign.json: not an oomguard report"
  "$tmp/run-base.json|$tmp/v2.json|v2.json: schema oomguard.report/2 is a version"
  "$tmp/empty|$tmp/base|empty: no test reports"
  "$tmp/run-base.json|$tmp/missing.json|missing.json: no such file"
  "$tmp/base|$tmp/foreign|Suite.Name.json: not an oomguard report"
  "$tmp/run-base.json|$tmp/phases-object.json|phases-object.json: the report.phases is not a list"
  "$tmp/run-base.json|$tmp/huge.json|huge.json: phase train.peak_allocated_bytes is not a byte count"
  "$tmp/replay-base.json|$tmp/replay-a100.json|replayed other settings"
)
for c in "${bad_cases[@]}"; do
  IFS='|' read -r a b want <<< "$c"
  expect 2 "$a" "$b" --report "$tmp/written.json" --markdown "$tmp/written.md"
  has "$want"
  [ "$(printf '%s\n' "$out" | wc -l)" = 1 ] || fail "more than one line: $out"
  if [ -e "$tmp/written.json" ] || [ -e "$tmp/written.md" ]; then fail "written after: $out"; fi
done
expect 2 "$tmp/base" "$tmp/head" --fail-above 5XB
has "--fail-above 5XB"
expect 2 "$tmp/base" "$tmp/head" --fail-above evalute=1%
has "no phase evalute on either side"
echo "ok: ${#bad_cases[@]} bad inputs and two bad limits exit 2 naming them"
