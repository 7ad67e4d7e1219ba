#!/usr/bin/env bash
# cuda_junit_check.sh CTEST CHECK_CUDA_JUNIT: the T4 job's gate (.github/scripts/check_cuda_junit.py)
# read against JUnit files that ctest itself writes (--output-junit), from small test lists
# of known outcomes: it passes only where a CUDA test ran and nothing was skipped.
# - a CUDA test that skipped (no device): exit 1, naming it;
# - no CUDA test at all (`ctest -L` matched none): exit 1;
# - CUDA tests that ran, by label alone and by the *Cuda name alone: exit 0 (one that failed
#   ran too: the job's ctest step fails the job for it).
set -euo pipefail
ctest_dir=$(dirname "$1")
check=$2
export PATH="$ctest_dir:$PATH"  # the gate lists the tests' labels with ctest, as on the runner
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# case NAME EXPECTED_EXIT TEXT TEST...: each TEST is "name|label|exit code" (77: skipped).
case_() {
  local name=$1 expected=$2 text=$3
  shift 3
  local dir="$tmp/$name"
  mkdir -p "$dir"
  for t in "$@"; do
    IFS='|' read -r test label code <<< "$t"
    echo "add_test([=[$test]=] \"/bin/sh\" \"-c\" \"exit $code\")"
    echo "set_tests_properties([=[$test]=] PROPERTIES LABELS \"$label\" SKIP_RETURN_CODE \"77\")"
  done > "$dir/CTestTestfile.cmake"
  ctest --test-dir "$dir" --output-junit "$dir/junit.xml" > "$dir/ctest.txt" 2>&1 || true
  [ -s "$dir/junit.xml" ] || { cat "$dir/ctest.txt"; fail "$name: ctest wrote no JUnit file"; }
  local rc=0
  python3 "$check" "$dir/junit.xml" "$dir" > "$dir/out.txt" 2>&1 || rc=$?
  [ "$rc" = "$expected" ] || { cat "$dir/out.txt"; fail "$name: exit $rc, expected $expected"; }
  grep -qF "$text" "$dir/out.txt" || { cat "$dir/out.txt"; fail "$name: no '$text'"; }
  echo "ok: $name -> exit $rc: $(grep -F "$text" "$dir/out.txt" | head -n 1)"
}

case_ skipped_on_a_runner_without_a_device 1 "skipped on the GPU runner" \
  "CudaTest.CountsAllocatedAndReservedCuda|cuda|77" "gpu.sanity|cuda|77" "unit.sizes|unit|0"
case_ no_cuda_test_in_the_list 1 "no CUDA test was executed" "unit.sizes|unit|0"
case_ cuda_tests_ran 0 "CUDA tests executed: 2, skipped: 0" \
  "gpu.sanity|cuda|0" "CudaTest.MeasureReadsTheCachingAllocatorCuda|memory|0" "unit.sizes|unit|0"
case_ a_cuda_test_failed_still_ran 0 "ran: gpu.sanity" "gpu.sanity|cuda|1"
echo "ok: the T4 job's JUnit gate"
