#!/usr/bin/env bash
# meta_gpt2_check.sh OOMGUARD: a GPT-2-small-sized TinyGPT (d_model 768, 12 layers, 12 heads,
# sequence 512, no checkpointing; 2 train steps, 1 evaluation batch, 8 new tokens) predicted for
# a T4 on the Meta device and on the CPU path (--allocator-model cuda) gives the same prediction
# per phase, within gpu-sanity's tolerances (1% + 1 MiB), the same outcome and retries
# (same_prediction.py). Two samples a batch, as batch 8 would, still reach each of the caching
# allocator's size classes with the model's own tensors (a layer's activations, 3 MiB, share
# 20 MiB segments; its MLP's, 12 MiB, and the attention scores, 24 MiB, take segments of their
# own; generation's per-token tensors are small blocks), and keep the batch dimension off the
# degenerate 1, where kernels may take other paths. The CPU path's run then took 11 s
# and 2.8 GB here, against 50 s and 5.7 GB at batch 8 (which ci/run-bench.sh's BM_MetaRun
# times).
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
gpt2=(--card t4 --set run.threads=2 --disable-guard grad_checkpoint
      --set model.d_model=768 --set model.layers=12 --set model.heads=12
      --set data.max_length=512 --set data.batch_size=2 --set train.steps=2 --set evaluate.batches=1
      --set generate.max_new_tokens=8)
for device in meta cpu; do
  extra=()
  [ "$device" = cpu ] && extra=(--allocator-model cuda)
  rc=0
  "$cli" run --device "$device" "${extra[@]}" "${gpt2[@]}" --report "$dir/$device.json" \
    > "$dir/$device.txt" 2>&1 || rc=$?
  # 0 or 1: the default budgets are the small default model's, so the verdict may be either.
  if [ "$rc" != 0 ] && [ "$rc" != 1 ]; then
    tail -5 "$dir/$device.txt"
    echo "FAIL: GPT-2-small on $device exited $rc"
    exit 1
  fi
done
python3 "$here/same_prediction.py" "$dir/cpu.json" "$dir/meta.json"
echo "ok: GPT-2-small predicted on the Meta device as on the CPU path"
