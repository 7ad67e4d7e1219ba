#!/usr/bin/env bash
# The default smoke run: train -> evaluate -> generate with a per-phase peak table.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
build/cpu/bin/oomguard run --report build/cpu/smoke-report.json "$@"
