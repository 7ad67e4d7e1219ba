#!/usr/bin/env bash
# The local GPU sanity run (an A100, an H200, any CUDA machine): builds oomguard against the
# PyTorch already installed there, with the CUDA meter (-DOOMGUARD_CUDA=ON: a CUDA toolkit is
# needed), prints the device as PyTorch and the driver see it and the cuBLAS workspaces that
# card allocates, runs the cuda tests with OOMGUARD_DEVICE=cuda (a test that cannot use the
# device fails, never skips; the workspace test again alone in its process), on a machine with
# two GPUs or more runs cuda:1 and repeat --jobs 2, runs the default config on CUDA as an
# emulated T4 and on CPU
# through the caching-allocator model of a T4 (with the default allocator settings and with
# expandable_segments:True, whose effect is read back from the allocator's segments), then a
# short repeat on the emulated T4, then both at capacities around the predicted reserved
# peak (the edge where the card runs out), and prints the tables: the CUDA peaks (allocated and
# reserved, retries) next to the CPU figures, and the measured peaks against the model's.
# It installs nothing; what the build needs beyond PyTorch, CUDA, CMake and a compiler comes
# from the machine's packages or from third_party/ (ci/vendor-deps.sh, carried with the tree).
#
# Exit 1 when a stage fails or when the measured CUDA figures and the model's differ beyond
# these tolerances (ci/report_table.py compare; the table prints them again), per phase:
#   peak allocated (the model's prediction: its rounded blocks and the card's cuBLAS
#   workspaces) and peak reserved: CUDA - model within +-(1% of the model's figure + 1 MiB);
#   allocator retries: both zero or both non-zero; the outcomes of the two runs equal, and the
#   phase an OOM happened in (also 1 MiB above and below the predicted reserved peak);
#   expandable_segments:True: the CUDA run's segments are expandable (in effect).
# Held against one H200 run (torch 2.11, emulating a T4): reserved equal to the byte in every
# phase, allocated equal in evaluate and generate and 97.5 KiB (0.2%) above in train.
# Budget: 8 minutes on an H200, the build included (two targets, -j$(nproc), ccache when
# there is one); the last line says how long it took.
#   OOMGUARD_TORCH_PYTHON   the python whose torch to build against (default: python3)
#   OOMGUARD_SANITY_RUNS    runs of the repeat (default 4)
#   OOMGUARD_SANITY_OUT     where reports go (default build/gpu/sanity)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${OOMGUARD_TORCH_PYTHON:-python3}
RUNS=${OOMGUARD_SANITY_RUNS:-4}
BUILD=build/gpu
OUT=${OOMGUARD_SANITY_OUT:-$BUILD/sanity}
TOLERANCE_PCT=1
SLACK=1MiB
BUDGET_S=480
say() { echo "[gpu-sanity $(date +%H:%M:%S) +${SECONDS}s] $*"; }

"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null || {
  echo "gpu-sanity: $PY has no torch with a usable CUDA device; set OOMGUARD_TORCH_PYTHON" >&2
  exit 2
}
mkdir -p "$BUILD" "$OUT"

# ---- the device as PyTorch and the driver report it ------------------------------------------
say "device"
"$PY" - <<'PY'
import torch
p = torch.cuda.get_device_properties(0)
free, total = torch.cuda.mem_get_info(0)
gib = lambda n: f"{n / 2**30:.2f} GiB"
print(f"  torch {torch.__version__} (CUDA {torch.version.cuda}), {p.name}, sm_{p.major}{p.minor}")
print(f"  get_device_properties(0).total_memory: {p.total_memory} bytes ({gib(p.total_memory)})")
print(f"  mem_get_info(): free {free} bytes ({gib(free)}), total {total} bytes ({gib(total)})")
PY
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1) ||
  driver=""
echo "  driver: ${driver:-unknown (no nvidia-smi)}"

# ---- cuBLAS workspaces on this card ------------------------------------------------------------
# One matmul forward and backward under the allocator's history: blocks whose stack names
# getNewWorkspace, or cuBLAS handle set-up, are the workspaces (one per handle and stream:
# the forward's thread and autograd's device thread each have a handle). Their size is held
# against oomguard's rule (sim::cublas_workspace) for this card: a mismatch fails the run.
say "cuBLAS workspaces (memory history of one matmul forward + backward)"
# dladdr: frames named from the libraries' exported symbols, without addr2line (which can
# be missing, and takes minutes over LibTorch's libraries).
workspace_rule=0
TORCH_SYMBOLIZE_MODE=${TORCH_SYMBOLIZE_MODE:-dladdr} \
  timeout 120 "$PY" - "$OUT/cublas-workspaces.json" <<'PY' || workspace_rule=$?
import json, os, re, sys
import torch

WORKSPACE = re.compile(r"getNewWorkspace|getCUDABlasLtWorkspace|getCurrentCUDABlasHandle|"
                       r"getCurrentCUDABlasLtHandle|CublasHandlePool|cublasCreate|cublasLtCreate")
MIB = 2**20
major, minor = torch.cuda.get_device_capability(0)
torch_version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
# The rule's default per handle (harness/include/oomguard/sim/gpu_rules.h).
hopper_size = major == 9 or (10 <= major <= 12 and torch_version >= (2, 15))
expected = 32 * MIB if hopper_size else 4096 * 1024 * 2 + 16 * 1024 * 8
out = {"device": torch.cuda.get_device_name(0), "sm": major * 10 + minor, "blocks": [],
       "total_bytes": None, "expected_bytes_per_handle": expected, "note": None}


def matching(frames):
    for f in frames or []:
        text = f"{f.get('name', '')} {f.get('filename', '')}"
        if WORKSPACE.search(text):
            return f.get("name") or f.get("filename")
    return None


try:
    torch.cuda.memory._record_memory_history()
    a = torch.randn(512, 512, device="cuda", requires_grad=True)
    b = torch.randn(512, 512, device="cuda", requires_grad=True)
    (a @ b).sum().backward()
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
except (AttributeError, TypeError, RuntimeError) as e:
    snapshot = None
    out["note"] = f"memory history not available in torch {torch.__version__}: {e}"

found = {}
if snapshot is not None:
    for segment in snapshot.get("segments", []):
        for block in segment.get("blocks", []):
            frame = matching(block.get("frames"))
            if frame and block.get("state") == "active_allocated":
                found[block.get("address")] = (block["size"], frame)
    for trace in snapshot.get("device_traces", []):
        for entry in trace:
            frame = matching(entry.get("frames")) if entry.get("action") == "alloc" else None
            if frame:
                found[entry.get("addr")] = (entry["size"], frame)
out["blocks"] = [{"address": k, "bytes": s, "frame": f} for k, (s, f) in found.items()]
# Every allocation of the probe, for reading by hand where no frame names a workspace.
out["allocations"] = [
    {"bytes": e.get("size"), "frames": [f.get("name") for f in (e.get("frames") or [])][:12]}
    for trace in (snapshot or {}).get("device_traces", []) for e in trace
    if e.get("action") == "alloc"]
status = 0
if found:
    sizes = [s for s, _ in found.values()]
    out["total_bytes"] = sum(sizes)
    print(f"  {len(sizes)} block(s), {sum(sizes) / MIB:.2f} MiB in all: "
          + ", ".join(f"{s} B" for s in sizes) + f"; first frame: {out['blocks'][0]['frame']}")
    if os.environ.get("CUBLAS_WORKSPACE_CONFIG"):
        print("  CUBLAS_WORKSPACE_CONFIG is set: the default is not checked")
    elif any(s != expected for s in sizes):
        print(f"  oomguard's rule says {expected} B per handle on sm_{major}{minor}: it is wrong "
              "here (sim::cublas_workspace)")
        status = 1
    else:
        print(f"  as oomguard's rule says for sm_{major}{minor} ({expected} B per handle)")
else:
    out["note"] = out["note"] or ("no block of the snapshot has a frame naming getNewWorkspace or "
                                  "cuBLAS handle set-up (C++ stacks missing or unsymbolized?)")
    print(f"  none found (not checked): {out['note']}")
with open(sys.argv[1], "w") as f:
    json.dump(out, f, indent=1)
sys.exit(status)
PY

# ---- build: the CLI and the cuda tests, with the CUDA meter -------------------------------------
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
say "configuring $BUILD (OOMGUARD_CUDA=ON)"
OOMGUARD_DEVICE=cuda cmake -S . -B "$BUILD" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DOOMGUARD_CUDA=ON \
  -DOOMGUARD_TORCH_PYTHON="$(command -v "$PY")" >"$BUILD.configure.log" 2>&1 || {
  tail -20 "$BUILD.configure.log" >&2; exit 1; }
# The CLI first: where the tests do not build, the runs below still tell what they can.
say "building oomguard (-j $(nproc))"
cmake --build "$BUILD" -j "$(nproc)" --target oomguard >"$BUILD.build.log" 2>&1 || {
  tail -30 "$BUILD.build.log" >&2; exit 1; }
status=0
say "building the cuda tests"
tests_built=1
cmake --build "$BUILD" -j "$(nproc)" --target oomguard_cuda_tests >>"$BUILD.build.log" 2>&1 || {
  tail -30 "$BUILD.build.log" >&2; echo "gpu-sanity: the cuda tests did not build" >&2
  tests_built=0; status=1; }

# ---- runs ----------------------------------------------------------------------------------------
if [ "$workspace_rule" != 0 ]; then
  echo "gpu-sanity: the cuBLAS workspace probe failed or contradicts oomguard's rule" >&2
  status=1
fi
if [ $tests_built = 1 ]; then
  say "cuda tests (OOMGUARD_DEVICE=cuda)"
  OOMGUARD_DEVICE=cuda "$BUILD/bin/oomguard_cuda_tests" --gtest_output="xml:$OUT/cuda-tests.xml" ||
    status=1
  if grep -qE 'result="skipped"|<skipped' "$OUT/cuda-tests.xml" 2>/dev/null; then
    echo "gpu-sanity: cuda tests were skipped on a machine with a device" >&2
    status=1
  fi
  # Alone in its process (as ctest runs it): no earlier test took a cuBLAS workspace there.
  alone=$(OOMGUARD_DEVICE=cuda "$BUILD/bin/oomguard_cuda_tests" \
    --gtest_filter=CudaTest.MeasureHoldsBothWorkspacesFromTheFirstPhaseCuda 2>&1) || status=1
  echo "$alone" | tail -n 3
  grep -q "PASSED.*1 test" <<< "$alone" || {
    echo "gpu-sanity: the workspace test did not run alone and pass" >&2; status=1; }
fi
gpus=$("$PY" -c "import torch; print(torch.cuda.device_count())" 2>/dev/null || echo 0)
if [ "$gpus" -ge 2 ]; then
  say "$gpus GPUs: cuda:1 (the run starts again seeing it alone) and repeat --jobs 2"
  "$BUILD/bin/oomguard" run --device cuda:1 --card t4 --report "$OUT/cuda-1-t4.json" || status=1
  "$BUILD/bin/oomguard" repeat -n 2 --jobs 2 --runs-dir "$OUT/runs-jobs" \
    --report "$OUT/repeat-jobs.json" --device cuda --card t4 || status=1
else
  echo "  one GPU: cuda:N and repeat --jobs across GPUs are not tried here"
fi
say "default run on CUDA as an emulated T4, and on CPU through the allocator model of a T4"
# Each with a PyTorch memory snapshot: CUDA's own, and the CPU run's trace replayed through
# the model (without the cuBLAS workspaces, which only the online model adds).
"$BUILD/bin/oomguard" run --device cuda --card t4 --report "$OUT/cuda-t4.json" \
  --snapshot "$OUT/cuda-t4.pickle" || status=1
"$BUILD/bin/oomguard" run --device cpu --card t4 --allocator-model cuda \
  --trace "$OUT/cpu-trace.jsonl" --report "$OUT/cpu-model.json" \
  --snapshot "$OUT/cpu-model.pickle" || status=1
say "allocator setting expandable_segments:True, on CUDA and through the model"
"$BUILD/bin/oomguard" run --device cuda --card t4 --set memory.alloc_conf=expandable_segments:True \
  --report "$OUT/cuda-t4-expandable.json" || status=1
"$BUILD/bin/oomguard" run --device cpu --card t4 --allocator-model cuda \
  --set memory.alloc_conf=expandable_segments:True --report "$OUT/cpu-model-expandable.json" ||
  status=1
say "train.precision=fp16-amp (CUDA autocast, GradScaler) on CUDA, and through the model on CPU and Meta"
"$BUILD/bin/oomguard" run --device cuda --card t4 --set train.precision=fp16-amp \
  --report "$OUT/cuda-t4-fp16-amp.json" || status=1
"$BUILD/bin/oomguard" run --device cpu --card t4 --allocator-model cuda \
  --set train.precision=fp16-amp --report "$OUT/cpu-model-fp16-amp.json" || status=1
"$BUILD/bin/oomguard" run --device meta --card t4 --set train.precision=fp16-amp \
  --report "$OUT/meta-model-fp16-amp.json" || status=1
say "repeat over $RUNS seeds on the emulated T4"
"$BUILD/bin/oomguard" repeat -n "$RUNS" --runs-dir "$OUT/runs" --report "$OUT/repeat.json" \
  --junit "$OUT/repeat-junit.xml" --device cuda --card t4 || status=1

# ---- the emulated card's edge --------------------------------------------------------------------
# Capacities around the reserved peak the model predicts (the default run's, T4 workspaces):
# 1 MiB above it both must pass, 1 MiB below it both must fail alike (the same phase, retries
# agreeing), the allocator's cache flushes included. At three quarters of it the comparison
# is printed, not checked: there the model's reserved peak was one 2 MiB segment above the
# H200's (tests/gpu-recordings/open/), a disagreement not yet explained.
edges=()
informational=""
edges_text=$(python3 -c '
import json, sys
peak = max(p["peak_reserved_bytes"] for p in json.load(open(sys.argv[1]))["phases"])
mib = 2**20
print(f"{peak // mib + 1}MiB {peak // mib - 1}MiB {peak * 3 // 4 // mib}MiB")' \
  "$OUT/cpu-model.json" 2>&1) || {
  echo "gpu-sanity: no capacities around the reserved peak: $edges_text" >&2
  status=1; edges_text=""; }
read -r -a edges <<<"$edges_text" || true
[ ${#edges[@]} = 3 ] && informational=${edges[2]}
for cap in "${edges[@]}"; do
  say "capacity $cap on CUDA and through the model (CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8)"
  for side in cuda model; do
    model_args=(--device cuda)
    [ $side = model ] && model_args=(--device cpu --allocator-model cuda)
    rc=0
    CUBLAS_WORKSPACE_CONFIG=:4096:2:16:8 "$BUILD/bin/oomguard" run "${model_args[@]}" \
      --capacity "$cap" --report "$OUT/edge-$side-$cap.json" \
      --snapshot "$OUT/edge-$side-$cap.pickle" >"$OUT/edge-$side-$cap.log" 2>&1 || rc=$?
    # 0 pass, 3 out of memory: anything else is a failure of its own
    if [ $rc != 0 ] && [ $rc != 3 ]; then
      tail -5 "$OUT/edge-$side-$cap.log" >&2
      status=1
    fi
  done
done

# ---- tables ----------------------------------------------------------------------------------------
echo
python3 ci/report_table.py run "$OUT/cuda-t4.json" "$OUT/cpu-model.json" || status=1
echo
# compare_reports MEASURED MODELLED TITLE GATING: the CUDA report against the model's, its table
# printed; a difference beyond the tolerances fails the run when GATING is 1, else is printed.
compare_reports() {
  local measured=$1 modelled=$2 title=$3 gating=$4 compared=0
  echo "$title:"
  echo
  if [ ! -f "$OUT/$measured.json" ] || [ ! -f "$OUT/$modelled.json" ]; then
    echo "gpu-sanity: no comparison of $measured and $modelled, a run left no report" >&2
    status=1
    return
  fi
  python3 ci/report_table.py compare "$OUT/$measured.json" "$OUT/$modelled.json" \
    --tolerance "$TOLERANCE_PCT" --slack "$SLACK" >"$OUT/compare-$measured.md" || compared=$?
  cat "$OUT/compare-$measured.md"
  echo
  if [ $compared != 0 ] && [ "$gating" = 1 ]; then
    echo "gpu-sanity: $title: the CUDA run and the model differ beyond the tolerances" >&2
    status=1
  elif [ $compared != 0 ]; then
    echo "gpu-sanity: $title: the CUDA run and the model disagree (printed, not checked)"
  fi
}
# The CPU run's allocations are not the GPU's (kernels differ), so this measures the model, its
# CPU-to-GPU rules and the CPU allocation stream together; once with the default allocator
# settings, once with expandable segments, then at the edge capacities.
compare_reports cuda-t4 cpu-model "Default settings" 1
compare_reports cuda-t4-expandable cpu-model-expandable "expandable_segments:True" 1
compare_reports cuda-t4-fp16-amp cpu-model-fp16-amp "fp16-amp, the CPU path" 1
compare_reports cuda-t4-fp16-amp meta-model-fp16-amp "fp16-amp, Meta" 1
for cap in "${edges[@]}"; do
  gating=1
  [ "$cap" = "$informational" ] && gating=0
  compare_reports "edge-cuda-$cap" "edge-model-$cap" "Capacity $cap" "$gating"
done
# Whether the setting took effect: the allocator's own segments, read back after the run.
effect=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["device_info"].get("alloc_conf_effect"))' \
  "$OUT/cuda-t4-expandable.json" 2>/dev/null) || effect="no report"
echo "expandable_segments:True on CUDA: $effect"
case "$effect" in
  "in effect"*) ;;
  *) echo "gpu-sanity: the allocator setting did not take effect" >&2; status=1 ;;
esac
echo
python3 ci/report_table.py repeat "$OUT/repeat.json" || status=1
over=""
[ "$SECONDS" -le "$BUDGET_S" ] || over=" (over the ${BUDGET_S}s budget)"
say "reports in $OUT; $([ $status = 0 ] && echo PASS || echo FAIL) in ${SECONDS}s$over"
exit $status
