#!/usr/bin/env bash
# precision_check.sh OOMGUARD: train.precision on the command line. fp16-amp and bf16-amp
# (CUDA autocast, emulated) pass guarded on a T4, on Meta and on the CPU path with the
# allocator model; the report names the precision and the start line says it; the train
# phase's predicted peak (forward, backward with its loss scaling, optimizer) is the same on
# the CPU path and on Meta within 1% + 1 MiB, and not fp32's (more than 64 KiB apart); an
# unknown precision is a usage error naming the key; --worst-case searches orders of the steps
# in mixed precision as in fp32.
set -euo pipefail
cli=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A short run on the CPU path: its fp16 GEMMs are slow (see harness/amp/README.md).
short=(--set train.steps=3 --set evaluate.batches=1 --set generate.prompts=1
  --set generate.max_new_tokens=4)
run() {  # NAME ARGS...: a run that must pass, its report in $tmp/NAME.json
  local name=$1
  shift
  "$cli" run --card t4 --report "$tmp/$name.json" "$@" > "$tmp/$name.log" 2>&1 ||
    { cat "$tmp/$name.log"; echo "FAIL: $name exited $?"; exit 1; }
}
for precision in fp32 fp16-amp bf16-amp; do
  run "meta-$precision" --device meta "${short[@]}" --set train.precision=$precision
  run "cpu-$precision" --device cpu --allocator-model cuda "${short[@]}" \
    --set train.precision=$precision
  grep -q "train precision $precision" "$tmp/cpu-$precision.log" ||
    { echo "FAIL: the start line of cpu-$precision does not say its precision"; exit 1; }
done
python3 - "$tmp" <<'PY'
import json, sys
tmp = sys.argv[1]
problems = []
def train_peak(name):
    report = json.load(open(f"{tmp}/{name}.json"))
    if report["outcome"] != "pass":
        problems.append(f"{name}: outcome {report['outcome']}")
    precision = name.split("-", 1)[1]
    if report["config"]["train"]["precision"] != precision:
        problems.append(f"{name}: config.train.precision is {report['config']['train']['precision']}")
    train = next(p for p in report["phases"] if p["name"] == "train")
    return train["predicted_peak_allocated_bytes"]
# The CPU path and Meta compute every phase with other kernels: their predictions agree.
for precision in ("fp32", "fp16-amp", "bf16-amp"):
    cpu, meta = train_peak(f"cpu-{precision}"), train_peak(f"meta-{precision}")
    print(f"{precision}: train predicted peak CPU path {cpu:,} B, Meta {meta:,} B")
    if abs(cpu - meta) > 0.01 * cpu + 1024 * 1024:
        problems.append(f"{precision}: CPU path {cpu:,} B and Meta {meta:,} B differ")
for where in ("meta", "cpu"):
    fp32 = train_peak(f"{where}-fp32")
    for precision in ("fp16-amp", "bf16-amp"):
        mixed = train_peak(f"{where}-{precision}")
        print(f"{where}: train predicted peak fp32 {fp32:,} B, {precision} {mixed:,} B")
        if abs(mixed - fp32) <= 64 * 1024:
            problems.append(f"{where} {precision}: within 64 KiB of fp32's train peak")
for p in problems:
    print("FAIL:", p)
sys.exit(1 if problems else 0)
PY
# The worst case and its order search in mixed precision (a loss scaler made inside the first
# step would make it unlike the others, and no order could be searched).
for precision in fp16-amp bf16-amp; do
  run "worst-$precision" --device meta --worst-case --set train.precision=$precision
  grep -q "orders of the steps replayed" "$tmp/worst-$precision.log" ||
    { cat "$tmp/worst-$precision.log"; echo "FAIL: --worst-case searched no order in $precision"; exit 1; }
done
set +e
"$cli" run --device meta --set train.precision=fp8 > "$tmp/bad.log" 2>&1
code=$?
set -e
[ "$code" = 2 ] && grep -q "train.precision" "$tmp/bad.log" ||
  { cat "$tmp/bad.log"; echo "FAIL: an unknown precision exited $code, not 2 naming the key"; exit 1; }
echo "precision: fp16-amp and bf16-amp pass guarded and differ from fp32"
