#!/usr/bin/env bash
# schema_check.sh OOMGUARD: the schemas (harness/schemas/) are a check that can fail. A real
# report, replay report and comparison match them; the same documents with a field renamed, a field
# missing or an outcome that contradicts the rest do not, and check-jsonschema names the
# field. Exit 77 (ctest: skipped) without the checkers' venv.
set -u
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
[ -x "${OOMGUARD_TOOLS_BIN:-}/python" ] || { echo "skipped: no checkers' venv (ci/install-tools.sh)"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run --set train.steps=2 --report "$dir/report.json" > /dev/null 2>&1
# A worst case on a data file: its seed is null (no seed chose its inputs).
printf 'one sample of a file\nanother sample, somewhat longer than the first one\n%s\n' \
  "the third sample of this small file" > "$dir/samples.txt"
"$cli" run --worst-case --set train.steps=2 --set "data.file=$dir/samples.txt" \
  --set generate.prompts=2 --report "$dir/worst.json" > /dev/null 2>&1
# With the allocator model: the reserved peak searched over orders of the steps.
"$cli" run --worst-case --set train.steps=3 --set evaluate.batches=2 --disable-guard truncate \
  --card t4 --allocator-model cuda --orders 4 --report "$dir/worst_t4.json" > /dev/null 2>&1
frag=$here/../sim/traces/fragmentation.jsonl
"$cli" replay "$frag" --card t4 --report "$dir/replay.json" > /dev/null 2>&1
"$cli" replay "$frag" --capacity 120MiB --report "$dir/replay_oom.json" > /dev/null 2>&1
# A comparison of the report against a copy whose evaluate peak grew by 64 MiB.
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
d['phases'][1]['peak_allocated_bytes'] += 64 << 20
json.dump(d, open(sys.argv[2], 'w'))" "$dir/report.json" "$dir/grown.json"
"$cli" compare "$dir/report.json" "$dir/grown.json" --fail-above 5% --report "$dir/compare.json" > /dev/null 2>&1
"$here/check_outputs.sh" "$dir/report.json" "$dir/worst.json" "$dir/worst_t4.json" "$dir/replay.json" "$dir/replay_oom.json" "$dir/compare.json" || { echo "FAIL: real outputs rejected"; exit 1; }

# name | python that breaks the document d | the error check-jsonschema must print
cases=(
  "report.json|d['phases'][0]['peak_bytes'] = d['phases'][0].pop('peak_allocated_bytes')|'peak_allocated_bytes' is a required property"
  "report.json|del d['device_info']|'device_info' is a required property"
  "report.json|d['outcome'] = 'oom'|None is not of type 'object'"
  "report.json|d['phases'][1]['status'] = 'passed'|'passed' is not one of"
  "report.json|del d['phases'][0]['losses']|'losses' is a required property"
  "report.json|d['seed'] = -1|-1 is less than the minimum of 0"
  "report.json|d['seed'] = None|'worst_case' is a required property"
  "worst.json|del d['worst_case']['reproduce']|'reproduce' is a required property"
  "worst.json|d['worst_case']['phases'][0]['steps'][0]['samples'] = [-2]|-2 is less than the minimum of 0"
  "worst_t4.json|del d['worst_case']['reserved']['reproduce_highest']|is not valid under any of the given schemas"
  "replay.json|d['phases'][0]['reserved_bytes'] = d['phases'][0].pop('peak_reserved_bytes')|'peak_reserved_bytes' is a required property"
  "replay.json|d['schema'] = 'oomguard.replay/2'|none of oomguard.report/1"
  "replay_oom.json|d['oom'] = None|None is not of type 'object'"
  "compare.json|d['outcome'] = 'changed'|False was expected"
  "compare.json|d['phases'][1]['presence'] = 'maybe'|'maybe' is not one of"
  "compare.json|del d['phases'][1]['tag_moves']|'tag_moves' is a required property"
  "compare.json|d['base']['kind'] = 'summary'|'summary' is not one of"
  "compare.json|d['phases'][1]['peak_allocated_bytes']['delta'] = '64MiB'|'64MiB' is not of type"
)
# Each case breaks its own copy; check-jsonschema runs once per schema over all of them (each
# of its processes starts Python: about a second) and names every error with its file.
failed=0
i=0
broken=()
for c in "${cases[@]}"; do
  IFS='|' read -r file change want <<< "$c"
  i=$((i + 1))
  broken+=("$dir/broken_${i}_$file")
  printf '%s\n' "$file" "$dir/broken_${i}_$file" "$change"
done > "$dir/changes.txt"
python3 -c "
import json, sys
lines = sys.stdin.read().split('\\n')
for source, target, change in zip(lines[0::3], lines[1::3], lines[2::3]):
    d = json.load(open(sys.argv[1] + '/' + source))
    exec(change)
    json.dump(d, open(target, 'w'))" "$dir" < "$dir/changes.txt"
out=$("$here/check_outputs.sh" "${broken[@]}" 2>&1); rc=$?
[ "$rc" = 1 ] || { echo "FAIL: the broken files: exit $rc, expected 1: $out"; exit 1; }
i=0
for c in "${cases[@]}"; do
  IFS='|' read -r file change want <<< "$c"
  i=$((i + 1))
  if printf '%s\n' "$out" | grep -F "broken_${i}_$file:" | grep -qF -- "$want"; then
    echo "ok: rejected ($change)"
  else
    echo "FAIL: $change: expected check-jsonschema to name \"$want\" for broken_${i}_$file: $out"
    failed=1
  fi
done
# A JUnit file whose counts disagree with its test cases.
printf '<testsuites><testsuite name="s" tests="2" failures="0"><testcase name="a"/></testsuite></testsuites>\n' \
  > "$dir/bad.xml"
out=$("$here/check_outputs.sh" "$dir/bad.xml" 2>&1); rc=$?
if [ "$rc" = 1 ] && [[ "$out" == *"tests=2, but 1 test cases"* ]]; then
  echo "ok: rejected a JUnit suite that miscounts"
else
  echo "FAIL: bad JUnit: exit $rc: $out"; failed=1
fi
exit $failed
