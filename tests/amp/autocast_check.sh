#!/usr/bin/env bash
# autocast_check.sh AUTOCAST_TESTS PYTHON: CUDA autocast on the CPU path and on Meta, held to
# PyTorch itself. autocast_reference.py (run by PYTHON, the project's venv with torch) gives
# PyTorch's peak allocated for the forward and loss of a GPT and a conv net in fp32, fp16 and
# bf16 on fake CUDA tensors; AUTOCAST_TESTS runs the same models in torch::nn on the CPU and
# on Meta with a T4 and no CPU-to-GPU rule (OOMGUARD_RULES=none), and autocast_compare.py
# holds each predicted peak to PyTorch's. Then, with the rules on, the attention rule must
# choose a T4's kernel by the dtype autocast gives q, k and v.
set -euo pipefail
binary=$1
python=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$python" -c "import torch.distributed._tools.mem_tracker" > /dev/null 2>&1; then
  echo "SKIP: $python has no torch with MemTracker (ci/setup.sh installs it)"
  exit 77
fi
"$python" "$here/autocast_reference.py" > "$tmp/reference.json" 2> "$tmp/reference.txt" ||
  { cat "$tmp/reference.txt"; echo "FAIL: PyTorch's reference did not run"; exit 1; }
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
python3 "$here/autocast_compare.py" "$tmp/reference.json" "$tmp/cpu.xml" "$tmp/meta.xml"
