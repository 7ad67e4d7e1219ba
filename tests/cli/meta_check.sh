#!/usr/bin/env bash
# meta_check.sh OOMGUARD: `oomguard run --device meta`, the run on shapes alone.
# - A model near a T4's size (d_model 1024, 24 layers, sequence 1024, batch 4, no
#   checkpointing) is predicted in one process whose largest resident set stays below the bytes
#   of its parameters alone: the model never existed on the CPU. Its predicted reserved peak
#   holds at least the parameters, their gradients and AdamW's two states.
# - A mid-sized model predicted on the Meta device and on the CPU (--allocator-model cuda)
#   agrees per phase within gpu-sanity's tolerances (1% + 1 MiB), with the same outcome.
# - repeat --jobs 2 runs on the Meta device (no GPU asked for).
# - An operator whose result depends on values (generate.stop_at_eos) ends the run with exit 7,
#   outcome unsupported, the report naming the operator and the phase.
# Every report is checked against report.schema.json.
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# Exits 0 or 1 (the default budgets are the small model's): the code is the run's verdict.
run_ok() { local rc=0; "$@" || rc=$?; [ "$rc" = 0 ] || [ "$rc" = 1 ] || fail "$* exited $rc"; }

big=(--set model.d_model=1024 --set model.layers=24 --set model.heads=16
     --set data.max_length=1024 --set data.batch_size=4 --set train.steps=2
     --set evaluate.batches=1 --set generate.max_new_tokens=8 --disable-guard grad_checkpoint)
python3 - "$cli" "$dir" "${big[@]}" <<'PY' || fail "the large model on the Meta device"
import json, resource, subprocess, sys
cli, d, big = sys.argv[1], sys.argv[2], sys.argv[3:]
report = f"{d}/big.json"
rc = subprocess.run([cli, "run", "--device", "meta", "--card", "t4", *big, "--report", report],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
assert rc in (0, 1), f"exit {rc}"
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
r = json.load(open(report))
assert r["device"] == "meta" and r["device_info"]["allocator_model"] == "cuda", r["device_info"]
c = r["config"]["model"]
C, L, V, P = c["d_model"], c["layers"], 258, c["max_seq_len"]
params = 4 * (V * C + P * C + L * (12 * C * C + 13 * C) + 2 * C)  # fp32 bytes
train = r["phases"][0]
assert train["peak_reserved_bytes"] >= 4 * params, (train["peak_reserved_bytes"], params)
assert rss < params, f"the process held {rss} B at most, the parameters alone are {params} B"
print(f"ok: {params / 2**30:.2f} GiB of parameters predicted on the Meta device: reserved "
      f"{train['peak_reserved_bytes'] / 2**30:.2f} GiB in train, the process at most "
      f"{rss / 2**20:.0f} MiB resident")
PY

mid=(--card t4 --set model.d_model=256 --set model.layers=4 --set model.heads=4
     --set data.max_length=256 --set train.steps=2 --set evaluate.batches=2
     --set generate.max_new_tokens=16 --set run.threads=2)
run_ok "$cli" run --device meta "${mid[@]}" --report "$dir/meta.json" > "$dir/meta.txt" 2>&1
run_ok "$cli" run --device cpu --allocator-model cuda "${mid[@]}" --report "$dir/cpu.json" \
  > "$dir/cpu.txt" 2>&1
python3 "$here/same_prediction.py" "$dir/cpu.json" "$dir/meta.json" ||
  fail "the Meta device's prediction is not the CPU's"

# repeat runs on Meta too, several runs at once, none asking for a GPU.
run_ok "$cli" repeat -n 2 --jobs 2 --device meta --card t4 --set train.steps=2 \
  --report "$dir/repeat-summary.json" > "$dir/repeat.txt" 2>&1
python3 - "$dir/repeat-summary.json" <<'PY' || fail "repeat on the Meta device"
import json, sys
s = json.load(open(sys.argv[1]))
assert len(s["iterations"]) == 2, s["iterations"]
print("ok: repeat -n 2 --jobs 2 --device meta ran both runs")
PY

rc=0
"$cli" run --device meta --card t4 --set train.steps=1 --set generate.stop_at_eos=true \
  --report "$dir/unsupported.json" > "$dir/unsupported.txt" 2>&1 || rc=$?
[ "$rc" = 7 ] || { cat "$dir/unsupported.txt"; fail "generate.stop_at_eos on Meta: exit $rc, expected 7"; }
grep -q "run on CPU instead" "$dir/unsupported.txt" || fail "the message does not say to run on CPU"
python3 - "$dir/unsupported.json" <<'PY' || fail "the unsupported report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["outcome"] == "unsupported", r["outcome"]
assert r["unsupported"]["operator"] == "aten::eq" and r["unsupported"]["phase"] == "generate", r["unsupported"]
assert [p["status"] for p in r["phases"]] == ["pass", "pass", "unsupported"], r["phases"]
print("ok: an operator that needs values ends the run: exit 7, outcome unsupported, aten::eq in generate")
PY
"$here/check_outputs.sh" "$dir"/*.json
echo "ok: the Meta device"
