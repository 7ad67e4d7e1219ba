#!/usr/bin/env bash
# The default smoke run: train -> evaluate -> generate with a per-phase peak table. Sets up
# only what the run needs (OOMGUARD_SETUP=smoke: the CLI, no checkers); ci/run-tests.sh
# builds the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
OOMGUARD_SETUP=smoke OOMGUARD_BUILD_TARGETS=oomguard ci/setup.sh
build/cpu/bin/oomguard run --report build/cpu/smoke-report.json "$@"
