#!/usr/bin/env bash
# modules_check.sh MODULE_TESTS: every module of torch::nn (tests/meta/module_cases.cpp) trains
# a step on the CPU and on the Meta device, each moved with to(device()), with OOMGUARD_CARD=t4:
# - every case runs on both, but those refused on Meta by the operator their case names (a
#   value read that decides a size);
# - on Meta each makes the outputs and gradients of the CPU's shapes and dtypes, and the T4's
#   predicted peaks, allocated and reserved, phase by phase, as the CPU path's within the
#   tolerance of modules_compare.py;
# - harness/meta/modules.md, the docs' table of what runs on Meta, is what this run finds
#   (OOMGUARD_WRITE_TABLE=1 writes it instead).
# Then the same under CUDA autocast at fp16 (OOMGUARD_MODULES_AUTOCAST): every case but
# BCELoss (refused by autocast itself, as on a card) runs on both, with the same shapes and
# predicted peaks.
set -euo pipefail
binary=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for device in cpu meta; do
  OOMGUARD_DEVICE=$device OOMGUARD_CARD=t4 OOMGUARD_SEED=1 \
    "$binary" --gtest_output="xml:$tmp/$device.xml" > "$tmp/$device.txt" 2>&1 ||
    { cat "$tmp/$device.txt"; echo "FAIL: the modules did not all pass on $device"; exit 1; }
done
write=()
[ "${OOMGUARD_WRITE_TABLE:-0}" = 1 ] && write=(--write)
python3 "$here/modules_compare.py" "$tmp/cpu.xml" "$tmp/meta.xml" \
  "$here/../../harness/meta/modules.md" "${write[@]}"
for device in cpu meta; do
  OOMGUARD_MODULES_AUTOCAST=fp16 OOMGUARD_DEVICE=$device OOMGUARD_CARD=t4 OOMGUARD_SEED=1 \
    "$binary" --gtest_output="xml:$tmp/$device-fp16.xml" > "$tmp/$device-fp16.txt" 2>&1 ||
    { cat "$tmp/$device-fp16.txt"; echo "FAIL: the modules did not all pass under autocast on $device"; exit 1; }
done
python3 "$here/modules_compare.py" "$tmp/cpu-fp16.xml" "$tmp/meta-fp16.xml" - --no-table
