#!/usr/bin/env bash
# trace_replay_check.sh OOMGUARD: a CPU run's trace replayed through the allocator model.
# The replay's requested peaks are the run's own meter peaks, phase by phase; allocated and
# reserved only add to them; the online model (--allocator-model cuda) predicts the same
# reserved peaks as the offline replay, and on a small card both fail in the same phase. The
# online model runs with CUBLAS_WORKSPACE_CONFIG=:0:0: no cuBLAS workspaces, which it would
# add and a trace of CPU allocations does not hold.
set -u
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { "$@" > "$dir/out.txt" 2>&1; rc=$?; }
expect() {  # expect CODE WHAT
  [ "$rc" = "$1" ] || { cat "$dir/out.txt"; echo "FAIL: $2 exited $rc, expected $1"; exit 1; }
}
short=(--device cpu --set train.steps=3)
run "$cli" run "${short[@]}" --trace "$dir/t.jsonl" --report "$dir/run.json"; expect 0 "run --trace"
run "$cli" replay "$dir/t.jsonl" --card t4 --report "$dir/replay.json"; expect 0 "replay --card t4"
export CUBLAS_WORKSPACE_CONFIG=:0:0
run "$cli" run "${short[@]}" --allocator-model cuda --card t4 --report "$dir/model.json"
expect 0 "run --allocator-model cuda --card t4"
run "$cli" replay "$dir/t.jsonl" --capacity 30MiB --report "$dir/small.json"
expect 3 "replay --capacity 30MiB"
run "$cli" run "${short[@]}" --allocator-model cuda --capacity 30MiB --report "$dir/small_model.json"
expect 3 "run --allocator-model cuda --capacity 30MiB"
"$(dirname "$0")/check_outputs.sh" "$dir"/{run,replay,model,small,small_model}.json || exit 1
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
load = lambda n: json.load(open(f"{d}/{n}.json"))
run, replay, model = load("run"), load("replay"), load("model")
small, small_model = load("small"), load("small_model")
predicted = {p["name"]: p for p in replay["phases"]}
checks = {
    "every phase replayed": all(p["name"] in predicted for p in run["phases"]),
    "requested peak == the run's meter peak": all(
        predicted[p["name"]]["peak_requested_bytes"] == p["peak_allocated_bytes"]
        for p in run["phases"]),
    "allocated >= requested, reserved >= allocated": all(
        p["peak_reserved_bytes"] >= p["peak_allocated_bytes"] >= p["peak_requested_bytes"]
        for p in replay["phases"]),
    "no OOM on a t4": replay["oom"] is None and replay["num_ooms"] == 0,
    "what is live at each peak, by tag, adds up to the peak": all(
        sum(t["bytes"] for t in p["live_at_peak"]) == p["peak_requested_bytes"]
        and any(t["tag"].startswith("block") for t in p["live_at_peak"])
        for p in replay["phases"] if p["name"] == "train"),
    "the run's live at peak (online) == the replay's (from the trace)": all(
        p["live_at_peak"] == predicted[p["name"]]["live_at_peak"] for p in run["phases"]),
    "online model reserved == replay reserved": all(
        p["peak_reserved_bytes"] == predicted[p["name"]]["peak_reserved_bytes"]
        for p in model["phases"]),
    "model run reported": model["device_info"]["allocator_model"] == "cuda",
    "small card: the failing allocation is named": small["oom"] is not None
        and small["num_ooms"] == 1 and small["oom"]["phase"] == "train"
        and small["oom"]["message"].startswith("CUDA out of memory. Tried to allocate"),
    "small card: the online model fails in the same phase": small_model["outcome"] == "oom"
        and small_model["oom"]["phase"] == small["oom"]["phase"],
}
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: " + ", ".join(bad) if bad else "ok: " + ", ".join(checks))
sys.exit(1 if bad else 0)
PY
