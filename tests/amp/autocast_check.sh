#!/usr/bin/env bash
# autocast_check.sh AUTOCAST_TESTS REFERENCE_JSON: CUDA autocast on the CPU path and on Meta,
# held to PyTorch itself. REFERENCE_JSON is PyTorch's peak allocated for the forward and loss
# of a GPT and a conv net in fp32, fp16 and bf16 on fake CUDA tensors, as
# autocast_reference.py prints it (tests/amp/autocast_reference.json, recorded from
# torch 2.15.0; reference_check.sh, behind OOMGUARD_SLOW, runs PyTorch again and holds the
# record to it). AUTOCAST_TESTS runs the same models in torch::nn on the CPU and on Meta with a
# T4 and no CPU-to-GPU rule (OOMGUARD_RULES=none), and autocast_compare.py holds each
# predicted peak to PyTorch's. Then, with the rules on, the attention rule must choose a T4's
# kernel by the dtype autocast gives q, k and v.
set -euo pipefail
binary=$1
reference=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for device in cpu meta; do
  OOMGUARD_DEVICE=$device OOMGUARD_CARD=t4 OOMGUARD_RULES=none OOMGUARD_SEED=1 \
    "$binary" --gtest_output="xml:$tmp/$device.xml" > "$tmp/$device.txt" 2>&1 ||
    { cat "$tmp/$device.txt"; echo "FAIL: the autocast models did not all pass on $device"; exit 1; }
  # With the rules on: the attention rule chooses the card's kernel by the cast dtype.
  OOMGUARD_DEVICE=$device OOMGUARD_CARD=t4 OOMGUARD_SEED=1 \
    "$binary" --gtest_filter='AutocastRules.*' > "$tmp/$device-rules.txt" 2>&1 ||
    { cat "$tmp/$device-rules.txt"; echo "FAIL: the attention rule under autocast on $device"; exit 1; }
  grep -q "\[  PASSED  \] 1 test" "$tmp/$device-rules.txt" ||
    { cat "$tmp/$device-rules.txt"; echo "FAIL: the attention rule's test did not run"; exit 1; }
done
python3 "$here/autocast_compare.py" "$reference" "$tmp/cpu.xml" "$tmp/meta.xml"
