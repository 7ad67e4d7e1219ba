#!/usr/bin/env bash
# repeat_check.sh OOMGUARD: a repeat keeps every run as its own JUnit test case, and merging
# two shards gives exactly the statistics of the unsharded repeat. Every summary, run report
# and JUnit file matches its schema or reader (check_outputs.sh).
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
rm -rf runs
small=(--set train.steps=1 --set evaluate.batches=1 --set generate.max_new_tokens=4)
"$cli" repeat -n 4 --report whole.json --junit whole.xml --runs-dir runs "${small[@]}"
"$here/check_outputs.sh" whole.json whole.xml runs/*.json
cases=$(grep -c '<testcase ' whole.xml)
[ "$cases" = 4 ] || { echo "JUnit holds $cases test cases, expected 4"; exit 1; }
"$cli" repeat -n 4 --shard 0/2 --report shard0.json "${small[@]}"
"$cli" repeat -n 4 --shard 1/2 --report shard1.json "${small[@]}"
"$cli" merge shard1.json shard0.json --report merged.json --junit merged.xml
"$here/check_outputs.sh" shard0.json shard1.json merged.json merged.xml
python3 - <<'PY'
import json
whole, merged = json.load(open("whole.json")), json.load(open("merged.json"))
assert whole["statistics"] == merged["statistics"], (whole["statistics"], merged["statistics"])
assert [i["seed"] for i in merged["iterations"]] == [0, 1, 2, 3], merged["iterations"]
PY
echo "ok: 4 JUnit test cases; merged shards match the unsharded statistics"
