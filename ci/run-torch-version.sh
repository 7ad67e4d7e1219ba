#!/usr/bin/env bash
# ci/run-torch-version.sh VERSION [CTEST ARGS...]: oomguard's unit tests against another torch
# from PyPI, e.g. 2.5.1 (pre-C++11-ABI wheels): ci/setup.sh installs it in a venv of its own
# (its CPU half: OOMGUARD_CUDA=off) and builds the CLI, the unit-test binaries and the fuzz
# targets' corpus replays in build/cpu-torch-VERSION (build/cpu for the pinned one), then
# `ctest -L unit` runs there; the default run's table is printed first. The benchmarks and
# the consumer projects stay out of this build; the Meta kernels' tests are in it.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: ci/run-torch-version.sh VERSION [CTEST ARGS...]" >&2; exit 2; }
version=$1
shift
pinned=$(awk -F= '/^TORCH_VERSION=/ { print $2; exit }' ci/setup.sh)
build=build/cpu
[ "$version" = "$pinned" ] || build=build/cpu-torch-$version
targets="oomguard oomguard_unit_tests oomguard_sim_tests oomguard_layer_tests oomguard_repeat_tests"
targets+=" oomguard_meta_tests oomguard_module_tests oomguard_amp_tests"
targets+=" oomguard_fuzz_sizes oomguard_fuzz_jsonl oomguard_fuzz_collator oomguard_fuzz_config"
targets+=" oomguard_fuzz_trace oomguard_fuzz_pickle"
OOMGUARD_TORCH_VERSION=$version OOMGUARD_CUDA=off OOMGUARD_SETUP=smoke \
  OOMGUARD_BUILD_TARGETS=$targets ci/setup.sh
"$build/bin/oomguard" run --device cpu
ctest --test-dir "$build" -L unit -j 2 --output-on-failure "$@"
