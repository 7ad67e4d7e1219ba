#!/usr/bin/env bash
# The local GPU sanity run (an A100, or any CUDA machine): builds oomguard against the PyTorch
# already installed there, runs the cuda tests, runs the default config on CUDA as an emulated
# T4 and on CPU through the caching-allocator model of a T4, then a short repeat on the
# emulated T4, and prints the tables: the CUDA peaks (allocated and reserved, retries) next to
# the CPU figures, and the real reserved peaks against the model's prediction. It installs nothing; what the
# build needs beyond PyTorch, CUDA, CMake and a compiler comes from the machine's packages or
# from third_party/ (ci/vendor-deps.sh, carried with the tree).
#   OOMGUARD_TORCH_PYTHON   the python whose torch to build against (default: python3)
#   OOMGUARD_SANITY_RUNS    runs of the repeat (default 4)
#   OOMGUARD_SANITY_OUT     where reports go (default build/gpu/sanity)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${OOMGUARD_TORCH_PYTHON:-python3}
RUNS=${OOMGUARD_SANITY_RUNS:-4}
BUILD=build/gpu
OUT=${OOMGUARD_SANITY_OUT:-$BUILD/sanity}
say() { echo "[gpu-sanity $(date +%H:%M:%S)] $*"; }

"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null || {
  echo "gpu-sanity: $PY has no torch with a usable CUDA device; set OOMGUARD_TORCH_PYTHON" >&2
  exit 2
}
say "torch $("$PY" -c 'import torch; print(torch.__version__, torch.cuda.get_device_name(0))' 2>/dev/null)"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
say "configuring $BUILD"
cmake -S . -B "$BUILD" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DOOMGUARD_TORCH_PYTHON="$(command -v "$PY")" >"$BUILD.configure.log" 2>&1 || {
  tail -20 "$BUILD.configure.log" >&2; exit 1; }
say "building oomguard and the cuda tests"
cmake --build "$BUILD" -j "$(nproc)" --target oomguard oomguard_cuda_tests >"$BUILD.build.log" 2>&1 || {
  tail -30 "$BUILD.build.log" >&2; exit 1; }

mkdir -p "$OUT"
status=0
say "cuda tests"
"$BUILD/bin/oomguard_cuda_tests" --gtest_output="xml:$OUT/cuda-tests.xml" || status=1
say "default run on CUDA as an emulated T4, and on CPU through the allocator model of a T4"
"$BUILD/bin/oomguard" run --device cuda --card t4 --report "$OUT/cuda-t4.json" || status=1
"$BUILD/bin/oomguard" run --device cpu --card t4 --allocator-model cuda \
  --trace "$OUT/cpu-trace.jsonl" --report "$OUT/cpu-model.json" || status=1
say "repeat over $RUNS seeds on the emulated T4"
"$BUILD/bin/oomguard" repeat -n "$RUNS" --runs-dir "$OUT/runs" --report "$OUT/repeat.json" \
  --junit "$OUT/repeat-junit.xml" --device cuda --card t4 || status=1

echo
python3 ci/report_table.py run "$OUT/cuda-t4.json" "$OUT/cpu-model.json"
echo
# The CPU run's allocations are not the GPU's (kernels, workspaces), so this measures the
# model and the trace together.
python3 ci/report_table.py compare "$OUT/cuda-t4.json" "$OUT/cpu-model.json"
echo
python3 ci/report_table.py repeat "$OUT/repeat.json"
say "reports in $OUT; $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
