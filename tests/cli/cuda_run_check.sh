#!/usr/bin/env bash
# cuda_run_check.sh OOMGUARD: a CUDA run on an emulated T4 with allocator settings from the
# config. Exit 77 (ctest: skipped) where no CUDA device is usable, 1 there when the suite
# asked for CUDA (OOMGUARD_DEVICE=cuda).
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run --device cuda --card t4 --set memory.alloc_conf=expandable_segments:True \
  --set train.steps=5 --report "$dir/r.json" > "$dir/out.txt" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "device cuda: " "$dir/out.txt"; then
  # A suite asked for CUDA (OOMGUARD_DEVICE=cuda, the GPU jobs) fails where it has none.
  cat "$dir/out.txt"
  [ "${OOMGUARD_DEVICE:-}" = cuda ] && { echo "FAIL: OOMGUARD_DEVICE=cuda and no CUDA device"; exit 1; }
  echo "skipped: no usable CUDA device"; exit 77
fi
cat "$dir/out.txt"
[ $rc = 0 ] || { echo "FAIL: exit $rc"; exit 1; }
"$(dirname "$0")/check_outputs.sh" "$dir/r.json" || exit 1
python3 - "$dir/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["device_info"]
checks = {
    "device is cuda": r["device"] == "cuda" and d["type"] == "cuda",
    "the GPU is named": bool(d["name"]) and d["total_bytes"] > 0,
    "the emulated card is t4": d["emulated_card"] == "t4" and 0 < r["capacity_bytes"] < d["total_bytes"],
    "alloc_conf came from the config": d["alloc_conf"] == "expandable_segments:True"
        and d["alloc_conf_source"] == "config",
    "reserved measured per phase": all(p["peak_reserved_bytes"] is not None
        and p["peak_reserved_bytes"] >= p["peak_allocated_bytes"] for p in r["phases"]),
}
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: " + ", ".join(bad) if bad else "ok: " + ", ".join(checks))
sys.exit(1 if bad else 0)
PY
