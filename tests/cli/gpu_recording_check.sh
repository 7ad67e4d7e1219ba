#!/usr/bin/env bash
# gpu_recording_check.sh OOMGUARD RECORDING...: each RECORDING is the report of a real CUDA run
# (tests/gpu-recordings/, written by ci/gpu-sanity.sh); the same run on this CPU through the
# caching-allocator model (--allocator-model cuda, with the recording's card or capacity,
# seed and allocator settings, and a T4's cuBLAS workspaces as the recording had them) must
# predict it within gpu-sanity's tolerances (ci/report_table.py compare): peak allocated and
# peak reserved within 1% + 1 MiB per phase, retries agreeing, the same outcome and OOM phase.
# A recording of another config than the default (a changed default run) fails, asking for a
# new recording rather than comparing unlike runs.
set -u
cli=$1; shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0
for recording in "$@"; do
  name=$(basename "$recording" .json)
  args=()
  while IFS= read -r arg; do args+=("$arg"); done < <(python3 - "$recording" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["device_info"]
print("--seed"); print(r["seed"])
if d.get("emulated_card"):
    print("--card"); print(d["emulated_card"])
elif r.get("capacity_bytes"):
    print("--capacity"); print(r["capacity_bytes"])
if d.get("alloc_conf"):
    print("--set"); print(f"memory.alloc_conf={d['alloc_conf']}")
PY
)
  rc=0
  CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8 "$cli" run --device cpu --allocator-model cuda \
    "${args[@]}" --report "$dir/$name.json" >"$dir/$name.log" 2>&1 || rc=$?
  if [ ! -f "$dir/$name.json" ] || { [ $rc != 0 ] && [ $rc != 1 ] && [ $rc != 3 ]; }; then
    tail -5 "$dir/$name.log"
    echo "FAIL: $name: the model's run exited $rc without a report"
    failed=1
    continue
  fi
  if ! python3 - "$recording" "$dir/$name.json" <<'PY'
import json, sys
recorded, modelled = (json.load(open(p)) for p in sys.argv[1:3])
if recorded["config"] != modelled["config"]:
    keys = sorted(k for k in set(recorded["config"]) | set(modelled["config"])
                  if recorded["config"].get(k) != modelled["config"].get(k))
    print(f"FAIL: the recording ran another config (differs in {', '.join(keys)}): record it "
          "again with ci/gpu-sanity.sh on a GPU")
    sys.exit(1)
PY
  then
    failed=1
    continue
  fi
  if python3 "$root/ci/report_table.py" compare "$recording" "$dir/$name.json" \
      --tolerance 1 --slack 1MiB >"$dir/$name.md"; then
    echo "ok: $name"
  else
    cat "$dir/$name.md"
    echo "FAIL: $name: the model's prediction is beyond the tolerances"
    failed=1
  fi
done
exit $failed
