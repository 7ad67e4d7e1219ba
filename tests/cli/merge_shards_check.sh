#!/usr/bin/env bash
# merge_shards_check.sh OOMGUARD: ci/merge-shards.sh, the final job of repeat-matrix.yml, on
# two shard artifacts laid out as download-artifact lays them (one folder each, run reports
# beside the summaries): one merged summary with the unsharded statistics, one JUnit file,
# a step-summary table; with a shard missing it says which seeds and exits 1.
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
small=(--set train.steps=1 --set evaluate.batches=1 --set generate.max_new_tokens=4)
for i in 0 1; do
  mkdir -p "$dir/shards/repeat-shard-$i"
  "$cli" repeat -n 4 --shard "$i/2" --report "$dir/shards/repeat-shard-$i/summary.json" \
    --runs-dir "$dir/shards/repeat-shard-$i/runs" "${small[@]}" > /dev/null
done
"$cli" repeat -n 4 --report "$dir/whole.json" "${small[@]}" > /dev/null
OOMGUARD=$cli "$root/ci/merge-shards.sh" "$dir/shards" "$dir/merged"
"$here/check_outputs.sh" "$dir/merged/repeat.json" "$dir/merged/repeat-junit.xml"
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
whole, merged = json.load(open(f"{d}/whole.json")), json.load(open(f"{d}/merged/repeat.json"))
md = open(f"{d}/merged/summary.md").read()
assert whole["statistics"] == merged["statistics"], (whole["statistics"], merged["statistics"])
assert "0/4 runs failed" in md and "| train | 4 |" in md, md
PY
rm -rf "$dir/shards/repeat-shard-1" "$dir/merged"
rc=0
OOMGUARD=$cli "$root/ci/merge-shards.sh" "$dir/shards" "$dir/merged" > "$dir/out.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$dir/out.txt"; echo "FAIL: a missing shard exited $rc, expected 1"; exit 1; }
grep -q "2 of 4 planned seeds have no result.*missing seeds: 1, 3" "$dir/merged/summary.md" || {
  cat "$dir/merged/summary.md"; echo "FAIL: the summary does not name the missing seeds"; exit 1; }
rc=0
"$root/ci/merge-shards.sh" "$dir/nothing" "$dir/merged" > "$dir/out.txt" 2>&1 || rc=$?
[ "$rc" = 2 ] || { cat "$dir/out.txt"; echo "FAIL: no summaries exited $rc, expected 2"; exit 1; }
echo "ok: merged two shard artifacts; a missing shard exits 1 naming its seeds; none exits 2"
