#!/usr/bin/env bash
# consumer_check.sh WAY OOMGUARD_SOURCE OOMGUARD_BUILD TORCH_PREFIX [CUDA]: builds and runs the CharLM
# project of this folder the way a team adopting oomguard would.
#   WAY find_package:     installs OOMGUARD_BUILD to a temporary prefix, then configures
#                         CharLM with CMAKE_PREFIX_PATH=that prefix only (the package finds
#                         its LibTorch itself);
#   WAY add_subdirectory: configures CharLM with oomguard's source tree inside it, after
#                         CharLM found Torch itself;
#   WAY FetchContent:     the same through FetchContent (SOURCE_DIR), oomguard finding Torch.
# CUDA: OOMGUARD_BUILD's OOMGUARD_CUDA (default AUTO). OFF (the CPU half of LibTorch, no CUDA
# toolkit: DESIGN.md) is passed on, and CharLM then leaves Torch to oomguard in the
# add_subdirectory way too: without a toolkit its own find_package(Torch) cannot load the
# wheel's config, and oomguard::torch is all it links.
# Then: its ctest passes against budgets.json; with the evaluation bug put back
# (CHARLM_EVAL_BUG=1) the budget assertion fails with the phase, the test, the peak, the
# budget and what was live; with the training leak (CHARLM_TRAIN_BUG=1) the per-step check
# fails naming the growth per step; accepting into a copy of the budgets rewrites exactly the peaks;
# with a T4 predicted, CharLMTest.LongTailFirst's training steps are searched in other orders.
# Prints the configure and build times, and how many of oomguard's files were compiled.
# The project is built from scratch each time, through ccache with ci/setup.sh's settings, in
# OOMGUARD_BUILD-charlm-WAY: beside OOMGUARD_BUILD, at its depth, so that oomguard's files
# compile there as they did in OOMGUARD_BUILD and the source builds find oomguard's Torch-free
# objects in the cache (the Torch ones differ by the path of their precompiled header, which
# lies in the build tree); its logs go to OOMGUARD_BUILD/consumer-WAY.
set -euo pipefail
way=$1 source=$2 build=$3 torch_prefix=$4 cuda=${5:-AUTO}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$build/consumer-$way
charlm=$build-charlm-$way
rm -rf "$tmp" "$charlm"
mkdir -p "$tmp"
fail() { echo "FAIL ($way): $*"; exit 1; }
# As on a user's machine: the seed counters in their default place (./oomguard-seeds).
unset OOMGUARD_SEED OOMGUARD_SEED_COUNTER_DIR
launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_DIR=${CCACHE_DIR:-${OOMGUARD_CACHE:-$HOME/.cache/oomguard}/ccache}
  export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
  # Paths relative to the build folder: the add_subdirectory and FetchContent builds (folders
  # of the same depth and layout) share their objects, and share the Torch-free ones with
  # OOMGUARD_BUILD.
  export CCACHE_BASEDIR=$source
fi
# OOMGUARD_BUILD's unity setting (the presets' is on) passed on: oomguard's files are compiled
# in the same batches there, and the source builds find those objects in the cache too.
unity=$(sed -n 's/^CMAKE_UNITY_BUILD:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null | head -n 1)
[ -n "$unity" ] && launcher+=(-DCMAKE_UNITY_BUILD="$unity")

case "$way" in
  find_package)
    cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.txt" ||
      { cat "$tmp/install.txt"; fail "cmake --install"; }
    [ -f "$tmp/prefix/lib/cmake/oomguard/oomguardConfig.cmake" ] || fail "no oomguardConfig.cmake"
    [ -f "$tmp/prefix/include/oomguard/gtest.h" ] || fail "no <oomguard/gtest.h>"
    [ -x "$tmp/prefix/bin/oomguard" ] || fail "no oomguard executable"
    # The installed CLI runs from its prefix (it finds the LibTorch it was built with): it
    # replays and draws a trace recorded by the build's own CLI.
    "$build/bin/oomguard" run --device cpu --set train.steps=2 --trace "$tmp/t.jsonl" \
      > "$tmp/trace-run.txt" 2>&1 || { cat "$tmp/trace-run.txt"; fail "recording a trace"; }
    "$tmp/prefix/bin/oomguard" replay "$tmp/t.jsonl" --card t4 > "$tmp/replay.txt" 2>&1 ||
      { cat "$tmp/replay.txt"; fail "the installed oomguard cannot replay a trace"; }
    "$tmp/prefix/bin/oomguard" plot "$tmp/t.jsonl" --card t4 -o "$tmp/t.svg" > "$tmp/plot.txt" 2>&1 &&
      [ -s "$tmp/t.svg" ] || { cat "$tmp/plot.txt"; fail "the installed oomguard cannot plot a trace"; }
    # Without the LibTorch it was built with, the installed CLI says which one it needs: an
    # executable whose library is gone stands in for it (the launcher is the installed one).
    mkdir -p "$tmp/gone/bin" "$tmp/gone/libexec/oomguard"
    cp "$tmp/prefix/bin/oomguard" "$tmp/gone/bin/"
    echo 'int gone() { return 0; }' > "$tmp/gone/gone.cpp"
    echo 'int gone(); int main() { return gone(); }' > "$tmp/gone/main.cpp"
    c++ -shared -fPIC -o "$tmp/gone/libgone.so" "$tmp/gone/gone.cpp"
    c++ -o "$tmp/gone/libexec/oomguard/oomguard" "$tmp/gone/main.cpp" -L"$tmp/gone" -lgone \
      -Wl,-rpath,"$tmp/gone"
    rm "$tmp/gone/libgone.so"
    rc=0
    "$tmp/gone/bin/oomguard" replay "$tmp/t.jsonl" --card t4 > "$tmp/gone.txt" 2>&1 || rc=$?
    if [ "$rc" != 127 ] || ! grep -q "built with LibTorch .* which is not there any more (missing: libgone.so)" "$tmp/gone.txt"; then
      cat "$tmp/gone.txt"
      fail "without its LibTorch the installed oomguard exits $rc without naming it"
    fi
    echo "ok: without its LibTorch the installed oomguard says which it needs"
    if grep -rl --include='*.h' '"harness/\|"data/\|"models/' "$tmp/prefix/include"; then
      fail "an installed header includes a private one"
    fi
    configure=(-DCMAKE_PREFIX_PATH="$tmp/prefix")
    ;;
  add_subdirectory|FetchContent)
    configure=(-DCHARLM_OOMGUARD_SOURCE="$source" -DCHARLM_OOMGUARD_HOW="$way"
               -DCMAKE_PREFIX_PATH="$torch_prefix" -DOOMGUARD_CUDA="$cuda")
    [ "$cuda" = OFF ] && configure+=(-DCHARLM_FIND_TORCH=OFF)
    ;;
  *) echo "usage: consumer_check.sh find_package|add_subdirectory|FetchContent SOURCE BUILD TORCH_PREFIX"
     exit 2 ;;
esac

start=$(date +%s.%N)
cmake -S "$here" -B "$charlm" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" \
  "${configure[@]}" > "$tmp/configure.txt" 2>&1 || { cat "$tmp/configure.txt"; fail "configure"; }
configured=$(date +%s.%N)
cmake --build "$charlm" > "$tmp/build.txt" 2>&1 || { cat "$tmp/build.txt"; fail "build"; }
built=$(date +%s.%N)
compiled=$(grep -c 'Building CXX object' "$tmp/build.txt" || true)
ours=$(grep 'Building CXX object' "$tmp/build.txt" | grep -vc 'charlm_memory_test.dir' || true)
awk -v s="$start" -v c="$configured" -v b="$built" -v n="$compiled" -v o="$ours" -v w="$way" \
  'BEGIN { printf "%s: configure %.1f s, build %.1f s: %d files compiled, %d of them oomguard'"'"'s\n", w, c - s, b - c, n, o }'
if [ "$way" != find_package ]; then
  [ ! -d "$charlm/bin" ] && [ ! -d "$charlm/seed-counters" ] ||
    fail "oomguard wrote its own output folders into the parent's build tree"
  if (cd "$charlm" && ctest -N | grep -q 'cli\.\|oomguard_'); then
    fail "oomguard's own tests joined the parent's ctest"
  fi
fi

(cd "$charlm" && ctest --output-on-failure) > "$tmp/ctest.txt" 2>&1 ||
  { cat "$tmp/ctest.txt"; fail "the guarded CharLM test failed"; }
grep -q "100% tests passed" "$tmp/ctest.txt" || { cat "$tmp/ctest.txt"; fail "no test ran"; }
echo "ok: guarded, CharLMTest.Memory passes within budgets.json"

# Repeated, each run takes the next seed (the per-test counter in the build tree), and each
# seed's report is kept beside the test's latest.
(cd "$charlm" && OOMGUARD_REPORT_DIR="$tmp/repeat-reports" ctest --repeat until-fail:3) \
  > "$tmp/repeat.txt" 2>&1 || { cat "$tmp/repeat.txt"; fail "ctest --repeat until-fail:3"; }
seeds=$(cat "$charlm/oomguard-seeds/CharLMTest.Memory")
[ "$seeds" = 4 ] || fail "after 1 + 3 runs the seed counter says $seeds, not 4"
for seed in 1 2 3; do
  [ -s "$tmp/repeat-reports/CharLMTest.Memory.seed-$seed.json" ] ||
    { ls "$tmp/repeat-reports"; fail "no report of seed $seed"; }
done
grep -q '"seed": 3' "$tmp/repeat-reports/CharLMTest.Memory.json" ||
  fail "CharLMTest.Memory.json does not hold the latest run (seed 3)"
echo "ok: ctest --repeat until-fail:3 ran seeds 1, 2, 3, each with its report"

rc=0
mkdir "$tmp/reports"
(cd "$charlm" && CHARLM_EVAL_BUG=1 OOMGUARD_BUDGETS="$here/budgets.json" \
  OOMGUARD_REPORT_DIR="$tmp/reports" ./charlm_memory_test) > "$tmp/bug.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/bug.txt"; fail "with the evaluation bug: exit $rc, expected 1"; }
grep -Eq 'phase evaluate of CharLMTest\.Memory peaked at [0-9.]+[KMG]iB, over its budget [0-9.]+[KMG]iB \(started at [0-9.]+[KMG]iB\)' \
  "$tmp/bug.txt" || { cat "$tmp/bug.txt"; fail "no pytest-memray-style message"; }
grep -q "live at the peak, by tag:" "$tmp/bug.txt" || { cat "$tmp/bug.txt"; fail "no live tags"; }
grep -q '"outcome": "budget_exceeded"' "$tmp/reports/CharLMTest.Memory.json" ||
  { cat "$tmp/reports/CharLMTest.Memory.json"; fail "the test's report does not say budget_exceeded"; }
echo "ok: with the evaluation bug the budget fails:"
sed -n '/phase evaluate of CharLMTest/,/^$/p' "$tmp/bug.txt" | head -n 12

# Every training step's logits kept: the per-step check fails naming the phase and the growth.
rc=0
(cd "$charlm" && CHARLM_TRAIN_BUG=1 OOMGUARD_BUDGETS="$here/budgets.json" \
  ./charlm_memory_test) > "$tmp/leak.txt" 2>&1 || rc=$?
[ "$rc" = 1 ] || { cat "$tmp/leak.txt"; fail "with the training leak: exit $rc, expected 1"; }
grep -q "phase train of CharLMTest.Memory keeps 384KiB more after each step (the median), over the tolerance 16KiB" \
  "$tmp/leak.txt" || { cat "$tmp/leak.txt"; fail "the per-step check did not name the leak"; }
echo "ok: with the training leak the per-step check fails:"
grep "keeps 384KiB more after each step" "$tmp/leak.txt" | head -n 1

# The project's own trace (OOMGUARD_TRACE), replayed for a T4 and drawn by the installed CLI.
if [ "$way" = find_package ]; then
  (cd "$charlm" && OOMGUARD_TRACE="$tmp/charlm.jsonl" OOMGUARD_BUDGETS="$here/budgets.json" \
    ./charlm_memory_test) > "$tmp/trace-test.txt" 2>&1 || { cat "$tmp/trace-test.txt"; fail "OOMGUARD_TRACE"; }
  "$tmp/prefix/bin/oomguard" replay "$tmp/charlm.jsonl" --card t4 > "$tmp/charlm-replay.txt" 2>&1 ||
    { cat "$tmp/charlm-replay.txt"; fail "the installed oomguard cannot replay the project's trace"; }
  grep -q "^CharLMTest.Memory/evaluate " "$tmp/charlm-replay.txt" ||
    { cat "$tmp/charlm-replay.txt"; fail "the project's phases are not in its trace"; }
  "$tmp/prefix/bin/oomguard" plot "$tmp/charlm.jsonl" --card t4 -o "$tmp/charlm.svg" > /dev/null 2>&1 ||
    fail "the installed oomguard cannot draw the project's trace"
  [ -s "$tmp/charlm.svg" ] || fail "the installed oomguard drew an empty picture of the project's trace"
  echo "ok: the project's own trace replayed and drawn by the installed oomguard"
fi

# The long tail first, predicted for a T4: the training's steps searched in other orders, and
# the phase fits the card in every one found.
if [ "$way" = find_package ]; then
  (cd "$charlm" && OOMGUARD_CARD=t4 ./charlm_memory_test --gtest_filter=CharLMTest.LongTailFirst) \
    > "$tmp/orders.txt" 2>&1 || { cat "$tmp/orders.txt"; fail "CharLMTest.LongTailFirst on t4"; }
  grep -E "CharLMTest\.LongTailFirst train: .*t4: fits, .* \([0-9]+ orders of its steps: reserved [0-9.]+[KMG]?i?B \.\. [0-9.]+[KMG]?i?B\)" \
    "$tmp/orders.txt" || { cat "$tmp/orders.txt"; fail "no orders searched for CharLMTest.LongTailFirst"; }
  echo "ok: the long tail first, its training fits a T4 in every order of its steps searched"
fi

cp "$here/budgets.json" "$tmp/budgets.json"
(cd "$charlm" && OOMGUARD_ACCEPT=1 OOMGUARD_BUDGETS="$tmp/budgets.json" \
  ./charlm_memory_test) > "$tmp/accept.txt" 2>&1 || { cat "$tmp/accept.txt"; fail "accept"; }
diff "$here/budgets.json" "$tmp/budgets.json" ||
  fail "accepting the guarded peaks changed budgets.json (the figures moved: review and accept)"
grep -q "OOMGUARD_ACCEPT=1: 2 budget(s) recorded in $tmp/budgets.json" "$tmp/accept.txt" ||
  { cat "$tmp/accept.txt"; fail "accepting does not say what it recorded"; }
echo "ok: accepting the guarded peaks reproduces budgets.json"
# Accepting with a filter that matches no test records nothing, and says so with exit 1.
rc=0
(cd "$charlm" && OOMGUARD_ACCEPT=1 OOMGUARD_BUDGETS="$tmp/budgets.json" \
  ./charlm_memory_test --gtest_filter=NoSuch.Test) > "$tmp/accept-none.txt" 2>&1 || rc=$?
if [ "$rc" != 1 ] || ! grep -q "OOMGUARD_ACCEPT=1, but no test ran" "$tmp/accept-none.txt"; then
  cat "$tmp/accept-none.txt"
  fail "accepting with no test run: exit $rc"
fi
echo "ok: accepting when no test ran fails saying so"
"$source/tests/cli/check_outputs.sh" "$here/budgets.json" "$tmp/reports/CharLMTest.Memory.json"
