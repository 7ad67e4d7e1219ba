#!/usr/bin/env bash
# gpu_recording_check.sh OOMGUARD RECORDING...: each RECORDING is the report of a real CUDA run
# (tests/gpu-recordings/, written by ci/gpu-sanity.sh); the same run on this CPU through the
# caching-allocator model (--allocator-model cuda, with the recording's card or capacity,
# seed and allocator settings, a T4's cuBLAS workspaces as the recording had them, and two
# threads) must predict it within gpu-sanity's tolerances (ci/report_table.py compare): peak allocated and
# peak reserved within 1% + 1 MiB per phase, retries agreeing, the same outcome and OOM phase.
# Each is predicted twice, on the CPU and on the Meta device (shapes alone, --device meta), and
# both must hold.
# A recording of another config than the default (a changed default run) fails, asking for a
# new recording rather than comparing unlike runs.
set -u
cli=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
[ $# -gt 0 ] || { echo "FAIL: no recordings given"; exit 1; }
# The default config, for keys added after a recording was made.
defaults=$("$cli" run --print-config)

# predict RECORDING NAME DEVICE ENV...: the recording's run (the caller's $args) on DEVICE
# through the model with ENV, its config the recording's, its figures within the tolerances.
predict() {
  local recording=$1 name=$2 device=$3
  shift 3
  local out="$dir/$name-$device.json"
  local rc=0
  # Two threads, whatever the runner has: CPU kernels size some buffers by thread count, and
  # the CUDA run's memory does not depend on it (run.threads is left out of the comparison).
  env "$@" "$cli" run --device "$device" --allocator-model cuda --set run.threads=2 \
    "${args[@]}" --report "$out" >"$dir/$name-$device.log" 2>&1 || rc=$?
  if [ ! -f "$out" ] || { [ $rc != 0 ] && [ $rc != 1 ] && [ $rc != 3 ]; }; then
    tail -5 "$dir/$name-$device.log"
    echo "FAIL: $name on $device: the model's run exited $rc without a report"
    failed=1
    return
  fi
  if ! python3 - "$recording" "$out" "$defaults" <<'PY'
import json, sys
recorded, modelled = (json.load(open(p)) for p in sys.argv[1:3])
def flat(config, prefix=""):
    for k, v in config.items():
        if isinstance(v, dict):
            yield from flat(v, f"{prefix}{k}.")
        elif f"{prefix}{k}" != "run.threads":
            yield f"{prefix}{k}", v
a, b = dict(flat(recorded["config"])), dict(flat(modelled["config"]))
# A key added to the config after the recording was made: the recording ran its default,
# which is what the key's default reproduces (config keys are only ever added).
defaults = dict(flat(json.loads(sys.argv[3])))
for k in set(b) - set(a):
    if b[k] == defaults.get(k):
        a[k] = b[k]
if a != b:
    keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    print(f"FAIL: the recording ran another config (differs in {', '.join(keys)}): record it "
          "again with ci/gpu-sanity.sh on a GPU")
    sys.exit(1)
PY
  then
    failed=1
    return
  fi
  if python3 "$root/ci/report_table.py" compare "$recording" "$out" \
      --tolerance 1 --slack 1MiB >"$dir/$name-$device.md"; then
    echo "ok: $name on $device"
  else
    cat "$dir/$name-$device.md"
    echo "FAIL: $name on $device: the model's prediction is beyond the tolerances"
    failed=1
  fi
}

for recording in "$@"; do
  name=$(basename "$recording" .json)
  # Arguments one per line, then the allocator settings (through the variable the recording
  # had them from: an environment's setting is not in its config).
  if ! spec=$(python3 - "$recording" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["device_info"]
args = ["--seed", str(r["seed"])]
if d.get("emulated_card"):
    args += ["--card", d["emulated_card"]]
elif r.get("capacity_bytes"):
    args += ["--capacity", str(r["capacity_bytes"])]
conf = d.get("alloc_conf") or ""
if conf and d.get("alloc_conf_source") != "environment":
    args += ["--set", f"memory.alloc_conf={conf}"]
print(conf if d.get("alloc_conf_source") == "environment" else "")
print("\n".join(args))
PY
  ); then
    echo "FAIL: $name: not a run report ($spec)"
    failed=1
    continue
  fi
  env_conf=$(head -n 1 <<<"$spec")
  mapfile -t args < <(tail -n +2 <<<"$spec")
  env_vars=(CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8)
  [ -n "$env_conf" ] && env_vars+=(PYTORCH_CUDA_ALLOC_CONF="$env_conf" PYTORCH_ALLOC_CONF="$env_conf")
  for device in cpu meta; do
    predict "$recording" "$name" "$device" "${env_vars[@]}"
  done
done
exit $failed
