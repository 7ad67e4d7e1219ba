#!/usr/bin/env bash
# snapshot_replay_check.sh OOMGUARD PYTHON: PyTorch memory snapshots into oomguard replay.
# tests/sim/make_snapshots.py (run by PYTHON, the torch venv's: it pickles as LibTorch does)
# writes snapshots whose segment events follow the caching allocator's rules. Replayed with
# the settings they were recorded with, the model's reserved bytes equal the recording's
# after every allocation, whether recording began at the start or mid-run and whether
# Python (protocol 4) or LibTorch's pickler (protocol 2, type tags) wrote them. What the
# model cannot replay, a pickle that would run code and a truncated one exit 2 naming why; a
# frame at PyTorch's unknown line (size_t(-1)) reads.
# Exit 77 (ctest: skipped) without a Python that has torch (installed; it need not import:
# oomguard's CPU set-up leaves out the NVIDIA libraries that importing it loads).
set -u
cli=$1 python=$2
here=$(cd "$(dirname "$0")" && pwd)
"$python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" \
  2>/dev/null || { echo "skipped: $python has no torch"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$python" -W ignore "$here/../sim/make_snapshots.py" "$dir" || exit 1
failed=0
check() {  # check NAME EXIT ARGS...: replay NAME.pickle, expect EXIT
  local name=$1 want=$2; shift 2
  "$cli" replay "$dir/$name.pickle" "$@" --report "$dir/$name.json" > "$dir/$name.out" 2>&1
  local rc=$?
  if [ "$rc" != "$want" ]; then
    cat "$dir/$name.out"; echo "FAIL: replay $name $*: exit $rc, expected $want"; failed=1
  fi
}
check default 0 --card t4
check default_p2 0 --card t4
check midrun 0 --card t4
check default 3 --capacity 30MiB
cp "$dir/default.json" "$dir/default_oom.json"
check default 0 --card t4
check unknown_line 3 --capacity 30MiB
"$here/check_outputs.sh" "$dir"/{default,default_p2,midrun,default_oom}.json || failed=1
"$python" - "$dir" <<'PY' || failed=1
import json, sys
d = sys.argv[1]
load = lambda n: json.load(open(f"{d}/{n}.json"))
MiB = 1 << 20
default, p2, midrun, oom = load("default"), load("default_p2"), load("midrun"), load("default_oom")
unknown = load("unknown_line")
checks = {
    "default: reserved matches after all 5 allocations":
        default["snapshot"]["allocations"] == 5 and default["snapshot"]["reserved_matches"] == 5
        and default["snapshot"]["first_mismatch"] is None,
    "default: replayed with the recorded settings": default["snapshot"]["recorded_alloc_conf"] == ""
        and default["alloc_conf"] == "",
    "default: peak reserved 48 MiB, allocated 4 + 0.59 + 25 MiB (the unsplit 1 MiB too)":
        default["peak_reserved_bytes"] == 48 * MiB
        and default["peak_allocated_bytes"] == 30 * MiB + 600 * 1024,
    "protocol 2 with type tags reads the same": p2["snapshot"] == default["snapshot"]
        and p2["phases"] == default["phases"],
    "mid-run: 2 of 2 match from a 20 MiB segment held before recording":
        midrun["snapshot"]["allocations"] == 2 and midrun["snapshot"]["reserved_matches"] == 2
        and midrun["peak_reserved_bytes"] == 32 * MiB and midrun["peak_allocated_bytes"] == 23 * MiB,
    "30 MiB card: the 25 MiB logits fail, named by their frame":
        oom["oom"] is not None and oom["oom"]["bytes"] == 25 * MiB
        and oom["oom"]["tag"] == "logits (train.py:13)" and oom["oom"]["alloc_bytes"] == 26 * MiB,
    "an unknown line (size_t(-1), a 9-byte LONG1) reads, shown as ?":
        unknown["oom"] is not None and unknown["oom"]["tag"] == "logits (train.py:?)"
        and unknown["snapshot"]["reserved_matches"] == oom["snapshot"]["reserved_matches"],
}
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: " + "; ".join(bad) if bad else "ok: " + "; ".join(checks))
sys.exit(1 if bad else 0)
PY
# name | what stderr must say
refused=(
  "two_streams|on a second CUDA stream (0 and 7)"
  "private_pool|private memory pool"
  "expandable|expandable segment"
  "two_devices|events on CUDA devices 0 and 1"
  "code|at byte 64: opcode STACK_GLOBAL builds an object or runs code"
  "truncated|truncated file"
)
for c in "${refused[@]}"; do
  name=${c%%|*} want=${c#*|}
  err=$("$cli" replay "$dir/$name.pickle" --card t4 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 2 ] && [[ "$err" == *"$name.pickle: "*"$want"* ]]; then
    echo "ok: $name refused: $err"
  else
    echo "FAIL: $name: exit $rc: $err"; failed=1
  fi
done
exit $failed
