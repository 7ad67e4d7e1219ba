#!/usr/bin/env bash
# merge-shards.sh SHARDS_DIR OUT_DIR: the final job of .github/workflows/repeat-matrix.yml,
# and what to run by hand on downloaded shard artifacts. Finds every repeat summary
# (oomguard.repeat/1) under SHARDS_DIR (one folder per artifact; run reports beside them are
# skipped), merges them with `oomguard merge` into OUT_DIR/repeat.json and
# OUT_DIR/repeat-junit.xml, and writes OUT_DIR/summary.md, the Markdown for the step summary.
# Exit: 0 every planned run present and passed; 1 a run failed or a shard's seeds are missing;
# 2 bad input (no summary found, summaries of different repeats).
# OOMGUARD names the executable (default: build/cpu/bin/oomguard beside this script).
set -euo pipefail
if [ $# != 2 ]; then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
shards_dir=$1 out=$2
ci=$(cd "$(dirname "$0")" && pwd)
cli=${OOMGUARD:-$ci/../build/cpu/bin/oomguard}
mkdir -p "$out"

mapfile -t summaries < <(python3 - "$shards_dir" <<'PY'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.json")):
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        continue
    if isinstance(doc, dict) and doc.get("schema") == "oomguard.repeat/1":
        print(path)
PY
)
if [ ${#summaries[@]} = 0 ]; then
  echo "merge-shards: no repeat summary (oomguard.repeat/1) under $shards_dir" >&2
  exit 2
fi
echo "merge-shards: ${#summaries[@]} shard summaries: ${summaries[*]}"

rc=0
"$cli" merge "${summaries[@]}" --report "$out/repeat.json" --junit "$out/repeat-junit.xml" || rc=$?
[ "$rc" = 2 ] && exit 2

python3 - "$out/repeat.json" "${#summaries[@]}" > "$out/missing.txt" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
planned, present = doc["plan"]["runs"], len(doc["iterations"])
if present != planned:
    have = {i["seed"] for i in doc["iterations"]}
    start = doc["plan"]["seed_start"]
    missing = [s for s in range(start, start + planned) if s not in have]
    print(f"**{planned - present} of {planned} planned seeds have no result** "
          f"({sys.argv[2]} shard summaries found; missing seeds: "
          f"{', '.join(map(str, missing[:20]))}{' ...' if len(missing) > 20 else ''})")
PY
{
  echo "## oomguard repeat over ${#summaries[@]} shards"
  echo
  if [ -s "$out/missing.txt" ]; then cat "$out/missing.txt"; echo; fi
  python3 "$ci/report_table.py" repeat "$out/repeat.json"
  echo
  echo "Merged summary \`repeat.json\`, JUnit \`repeat-junit.xml\` (one test case per seed)."
} > "$out/summary.md"
if [ -s "$out/missing.txt" ]; then
  cat "$out/missing.txt" >&2
  [ "$rc" = 0 ] && rc=1
fi
rm -f "$out/missing.txt"
exit "$rc"
