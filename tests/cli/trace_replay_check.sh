#!/usr/bin/env bash
# trace_replay_check.sh OOMGUARD: a CPU run's trace replayed through the allocator model.
# Replayed without rules, the requested peaks are the run's own meter peaks, phase by phase;
# allocated and reserved only add to them. Replayed with the card's rules, the trace's gemm
# events take the cuBLAS workspaces, and the online model (--allocator-model cuda) predicts
# the same allocated and reserved peaks as the offline replay; on a small card both fail in
# the same phase.
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
run "$cli" replay "$dir/t.jsonl" --card t4 --rules none --report "$dir/replay.json"
expect 0 "replay --card t4 --rules none"
run "$cli" replay "$dir/t.jsonl" --card t4 --report "$dir/replay_rules.json"
expect 0 "replay --card t4"
run "$cli" run "${short[@]}" --allocator-model cuda --card t4 --report "$dir/model.json"
expect 0 "run --allocator-model cuda --card t4"
run "$cli" replay "$dir/t.jsonl" --capacity 30MiB --report "$dir/small.json"
expect 3 "replay --capacity 30MiB"
run "$cli" run "${short[@]}" --allocator-model cuda --capacity 30MiB --report "$dir/small_model.json"
expect 3 "run --allocator-model cuda --capacity 30MiB"
"$(dirname "$0")/check_outputs.sh" "$dir"/{run,replay,replay_rules,model,small,small_model}.json ||
  exit 1
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
load = lambda n: json.load(open(f"{d}/{n}.json"))
run, replay, model = load("run"), load("replay"), load("model")
ruled = {p["name"]: p for p in load("replay_rules")["phases"]}
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
    "the trace's gemm events took two T4 workspaces":
        load("replay_rules")["cublas_workspace_bytes"] == 2 * 8519680,
    "online model allocated and reserved == the replay's with rules": all(
        p["predicted_peak_allocated_bytes"] == ruled[p["name"]]["peak_allocated_bytes"]
        and p["peak_reserved_bytes"] == ruled[p["name"]]["peak_reserved_bytes"]
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
