#!/usr/bin/env bash
# Sets up, checks the GitHub workflows (GitHub's schema; actionlint with shellcheck), runs the
# whole ctest suite (preset cpu; arguments go to that ctest: CUDA tests show as skipped
# without a device), then builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer
# (preset asan, clang) and runs them: any report fails the run. OOMGUARD_ASAN=0 skips the sanitizer stage.
# The tests that are slow by nature (consumer projects built, proofs over many seeds or sizes,
# PyTorch's own Python, whose NVIDIA libraries set-up then installs; tests/support/slow.sh) run
# here: OOMGUARD_SLOW=0 leaves them out, as a plain `ctest` does.
set -euo pipefail
cd "$(dirname "$0")/.."
export OOMGUARD_SLOW=${OOMGUARD_SLOW:-1}
ci/setup.sh
ci/check-workflows.sh
ctest --preset cpu "$@"
if [ "${OOMGUARD_ASAN:-1}" != 0 ]; then
  OOMGUARD_PRESET=asan ci/setup.sh
  ctest --preset asan
fi
