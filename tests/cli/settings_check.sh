#!/usr/bin/env bash
# settings_check.sh OOMGUARD: the fragmentation case (harness/sim/README.md), three allocator
# settings and two cards in one replay: a row and a `settings` entry each (cards, then
# capacities, each with every setting in the order given). On the
# 120 MiB card the default fails (exit 3) while expandable segments fit with no margin and
# max_split_size_mb:25 with 10 MiB; on a T4 all three fit.
set -u
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" replay "$here/../sim/traces/fragmentation.jsonl" --capacity 120MiB --card t4 \
  --alloc-conf "" --alloc-conf expandable_segments:True --alloc-conf max_split_size_mb:25 \
  --report "$dir/r.json" > "$dir/out.txt" 2>&1
rc=$?
cat "$dir/out.txt"
[ "$rc" = 3 ] || { echo "FAIL: exit $rc, expected 3 (one setting runs out of memory)"; exit 1; }
"$here/check_outputs.sh" "$dir/r.json" || exit 1
python3 - "$dir/r.json" "$dir/out.txt" <<'PY'
import json, sys
r, out = json.load(open(sys.argv[1])), open(sys.argv[2]).read()
MiB = 1 << 20
rows = [(s["card"], s["capacity_bytes"] // MiB, s["alloc_conf"], s["outcome"], s["margin_bytes"])
        for s in r["settings"]]
t4 = r["settings"][0]["capacity_bytes"]
want = [(None, 120, "", "oom", None),
        (None, 120, "expandable_segments:True", "pass", 0),
        (None, 120, "max_split_size_mb:25", "pass", 10 * MiB)]
checks = {
    "a row per card and setting, 120 MiB ones as worked out": rows[3:] == want and len(rows) == 6,
    "on a t4 every setting fits": [s["alloc_conf"] for s in r["settings"][:3]] == [w[2] for w in want]
        and all(s["card"] == "t4" and s["outcome"] == "pass"
                and s["margin_bytes"] == t4 - s["peak_reserved_bytes"] for s in r["settings"][:3]),
    "the top level is the first setting": r["card"] == "t4" and r["alloc_conf"] == ""
        and r["peak_reserved_bytes"] == r["settings"][0]["peak_reserved_bytes"],
    "the table names the failing setting": "120MiB default: out of memory at trace line 11" in out,
}
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: " + "; ".join(bad) if bad else "ok: " + "; ".join(checks))
sys.exit(1 if bad else 0)
PY
