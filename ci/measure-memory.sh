#!/usr/bin/env bash
# measure-memory.sh BUILD_DIR OUT_DIR: one commit's memory, measured the same way on every
# commit, for `oomguard compare` (.github/workflows/memory-diff.yml measures a pull request's
# merge base and its head with head's copy of this script). It uses only what the built tree
# BUILD_DIR holds (BUILD_DIR/bin/oomguard and BUILD_DIR's ctest files), so it measures a build
# of an older commit too. It writes:
#   OUT_DIR/run.json          `oomguard run --device cpu --card t4 --allocator-model cuda
#                             --seed 0`: the default run on CPU, predicted for a T4
#   OUT_DIR/run.txt           its output
#   OUT_DIR/tests/            the reports (oomguard.report/1) of the GoogleTest memory tests,
#                             `ctest -L memory` with OOMGUARD_REPORT_DIR, OOMGUARD_CARD=t4,
#                             OOMGUARD_SEED=0, OOMGUARD_SLOW=1 (only tests measured through oomguard's
#                             GoogleTest layer write one)
#   OUT_DIR/ctest.txt, OUT_DIR/ctest-junit.xml   ctest's output
# The caller's OOMGUARD_* and allocator variables are cleared first, so both commits are
# measured alike. A run over its budgets (exit 1) or out of memory (3), and failing tests, are
# measured all the same (the comparison is the point) and said on stderr.
# Exit: 0 measured; 2 bad arguments, no build at BUILD_DIR, or a run that left no report.
set -euo pipefail
if [ $# != 2 ]; then
  sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
die() { echo "measure-memory: $*" >&2; exit 2; }
build=$1
[ -d "$build" ] || die "$build: no such build folder"
build=$(cd "$build" && pwd)
cli=$build/bin/oomguard
[ -x "$cli" ] || die "$cli: not built (the CLI of the build to measure)"
[ -f "$build/CTestTestfile.cmake" ] || die "$build: no CTestTestfile.cmake (not a configured build with tests)"
mkdir -p "$2"
out=$(cd "$2" && pwd)
rm -rf "$out/tests" "$out/run.json"
mkdir -p "$out/tests"

# Measured alike whatever the caller's environment says: no budgets written or read from
# elsewhere, no other card, capacity, allocator setting, rules or device.
while IFS= read -r name; do
  unset "$name"
done < <(compgen -e | grep -E '^(OOMGUARD_|PYTORCH_(CUDA_)?ALLOC_CONF$|CUBLAS_WORKSPACE_CONFIG$)' || true)

echo "measure-memory: $cli run -> $out/run.json"
rc=0
"$cli" run --device cpu --card t4 --allocator-model cuda --seed 0 --report "$out/run.json" 2>&1 |
  tee "$out/run.txt" || rc=$?
case "$rc" in
  0) ;;
  1|3)
    [ -s "$out/run.json" ] || die "the run exited $rc and wrote no report $out/run.json"
    echo "measure-memory: the run exited $rc ($([ "$rc" = 1 ] && echo "a phase over its budget" || echo "out of memory on the card")); measured all the same" >&2
    ;;
  2) die "the run exited 2: bad usage (a build older than one of --card, --allocator-model, --seed, --report?); see $out/run.txt" ;;
  *) die "the run exited $rc (a crash or a signal); see $out/run.txt" ;;
esac

echo "measure-memory: ctest -L memory in $build -> $out/tests/"
jobs=$(nproc 2>/dev/null || echo 2)
rc=0
# OOMGUARD_SLOW=1: the memory tests slow by nature are measured too.
OOMGUARD_REPORT_DIR=$out/tests OOMGUARD_CARD=t4 OOMGUARD_SEED=0 OOMGUARD_SLOW=1 \
  ctest --test-dir "$build" -L memory --output-on-failure -j "$jobs" \
  --output-junit "$out/ctest-junit.xml" 2>&1 | tee "$out/ctest.txt" || rc=$?
if [ "$rc" != 0 ]; then
  echo "measure-memory: ctest -L memory exited $rc (failing tests, listed above); their reports are measured all the same" >&2
fi
reports=$(find "$out/tests" -maxdepth 1 -name '*.json' | wc -l)
if [ "$reports" = 0 ]; then
  echo "measure-memory: no test wrote a report into $out/tests (no test labelled memory, or a build whose tests predate OOMGUARD_REPORT_DIR)" >&2
else
  echo "measure-memory: $reports test report(s) in $out/tests"
fi
