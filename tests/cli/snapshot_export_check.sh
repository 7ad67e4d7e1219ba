#!/usr/bin/env bash
# snapshot_export_check.sh OOMGUARD PYTHON: snapshots oomguard writes open in PyTorch's own
# tools. A short CPU run writes its trace and, with --snapshot, the run through the
# caching-allocator model as a PyTorch memory snapshot; PyTorch's `torch/cuda/_memory_viz.py
# stats` and `trace` (PYTHON: the torch venv's; the package is not imported) read it and print the model's reserved bytes,
# one cudaMalloc per segment and one allocation per alloc of the trace; imported again, it
# replays to the same figures as the trace, reserved as recorded after every allocation.
# Exit 77 (ctest: skipped) without a Python that has torch.
set -u
cli=$1 python=$2
here=$(cd "$(dirname "$0")" && pwd)
# PyTorch's own reader, torch/cuda/_memory_viz.py, run from the installed torch without
# importing the package (which would load the wheel's NVIDIA libraries; the reader needs none).
viz=$("$python" -c "import importlib.util, os; s = importlib.util.find_spec('torch'); print(os.path.join(s.submodule_search_locations[0], 'cuda', '_memory_viz.py'))" 2>/dev/null)
[ -f "$viz" ] || { echo "skipped: $python has no torch"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run --device cpu --set train.steps=3 --card t4 --trace "$dir/t.jsonl" \
  --snapshot "$dir/s.pickle" > "$dir/run.txt" 2>&1 || { cat "$dir/run.txt"; echo "FAIL: run"; exit 1; }
"$cli" replay "$dir/t.jsonl" --card t4 --report "$dir/trace.json" > /dev/null 2>&1 || exit 1
"$cli" replay "$dir/s.pickle" --card t4 --report "$dir/back.json" > /dev/null 2>&1 || exit 1
"$cli" replay "$dir/t.jsonl" --card t4 --export-snapshot "$dir/e.pickle" > /dev/null 2>&1 || exit 1
"$here/check_outputs.sh" "$dir/trace.json" "$dir/back.json" || exit 1
for tool in stats trace; do
  "$python" -W ignore -c 'import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name="__main__")' \
    "$viz" "$tool" "$dir/s.pickle" > "$dir/$tool.txt" 2>&1 ||
    { cat "$dir/$tool.txt"; echo "FAIL: _memory_viz $tool cannot read the snapshot"; exit 1; }
done
"$python" -W ignore - "$dir" "$viz" <<'PY'
import importlib.util, json, re, sys
spec = importlib.util.spec_from_file_location("_memory_viz", sys.argv[2])
viz_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(viz_module)
Bytes = viz_module.Bytes
d = sys.argv[1]
trace = json.load(open(f"{d}/trace.json"))
back = json.load(open(f"{d}/back.json"))
stats, viz = open(f"{d}/stats.txt").read(), open(f"{d}/trace.txt").read().splitlines()
# The run's allocations, and a cuBLAS workspace at each gemm event (the forward's, the backward's).
allocs = sum(1 for line in open(f"{d}/t.jsonl")
             if ('"op":"alloc"' in line and '"bytes":0,' not in line) or '"op":"gemm"' in line)
mallocs = sum(1 for line in viz if " = cudaMalloc(" in line)
viz_allocs = sum(1 for line in viz if re.match(r"^[a-z]+\d* = [a-z]+\d*\[\d+:", line))
keys = ["peak_requested_bytes", "peak_allocated_bytes", "peak_reserved_bytes",
        "largest_gap_bytes", "num_alloc_retries"]
checks = {
    "stats: the model's reserved bytes (nothing released)": trace["num_alloc_retries"] == 0
        and f"total_reserved: {Bytes(trace['peak_reserved_bytes'])}" in stats,
    "trace: one cudaMalloc per segment": mallocs > 0 and f"segments: {mallocs}" in stats,
    "trace: one allocation per alloc of the run's trace": viz_allocs == allocs,
    "imported again: the same figures": all(back[k] == trace[k] for k in keys),
    "imported again: reserved as recorded after every allocation":
        back["snapshot"]["allocations"] == allocs == back["snapshot"]["reserved_matches"],
    "replay --export-snapshot writes the same snapshot as run --snapshot":
        open(f"{d}/e.pickle", "rb").read() == open(f"{d}/s.pickle", "rb").read(),
}
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: " + "; ".join(bad) if bad else "ok: " + "; ".join(checks))
sys.exit(1 if bad else 0)
PY
