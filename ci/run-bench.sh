#!/usr/bin/env bash
# Builds, runs every benchmark with repetitions and writes Google Benchmark JSON plus a
# Markdown table of medians and the target ratios (build/cpu/bench/). Extra arguments go to
# the benchmark binary, e.g. --benchmark_filter=BM_DecodeCache.
# Peak bytes come from a second, single-repetition run (see tests/bench/bench_main.cpp for
# why): allocation is deterministic here, so one measurement is the figure.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh
out=build/cpu/bench
mkdir -p "$out"
# Repetitions run in random order: on a shared machine whichever benchmark runs first or in a
# noisy spell would otherwise carry the noise as if it were a difference.
build/cpu/bin/oomguard_bench --benchmark_repetitions="${OOMGUARD_BENCH_REPETITIONS:-5}" \
  --benchmark_min_time="${OOMGUARD_BENCH_MIN_TIME:-1}" --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out/bench.json" --benchmark_out_format=json "$@"
build/cpu/bin/oomguard_bench --benchmark_repetitions=1 --benchmark_min_time=0.0001 \
  --benchmark_out="$out/memory.json" --benchmark_out_format=json "$@" >/dev/null
python3 ci/bench_table.py "$out/bench.json" "$out/memory.json" | tee "$out/bench.md"
