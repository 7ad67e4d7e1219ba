#!/usr/bin/env bash
# Builds and runs the whole ctest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
ctest --preset cpu "$@"
