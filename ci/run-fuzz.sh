#!/usr/bin/env bash
# Fuzzes the parsers with libFuzzer: the config parser, the size parser, the data-file
# (JSON Lines) reader, the collator, the allocation-trace reader with the allocator model,
# and the pickle reader with the PyTorch snapshot import. Builds preset fuzz (clang, ASan + UBSan), then runs
# each target for OOMGUARD_FUZZ_SECONDS (default 60) from its seed corpus in tests/fuzz/corpus.
# New inputs that reach new code go to build/fuzz/corpus/<target> (not into the tree); a crash
# leaves its input in build/fuzz/findings/<target>/ and fails the script. A finding, once
# fixed, is copied into tests/fuzz/corpus/<target>/ so that every ctest run replays it.
#   ci/run-fuzz.sh [target...]     targets: config sizes jsonl collator trace pickle (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."

SECONDS_PER_TARGET=${OOMGUARD_FUZZ_SECONDS:-60}
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(config sizes jsonl collator trace pickle)
for t in "${TARGETS[@]}"; do
  case $t in config|sizes|jsonl|collator|trace|pickle) ;;
    *) echo "run-fuzz: unknown target '$t'; known: config sizes jsonl collator trace pickle" >&2; exit 2 ;;
  esac
done

OOMGUARD_PRESET=fuzz ci/setup.sh

status=0
for t in "${TARGETS[@]}"; do
  corpus=build/fuzz/corpus/$t findings=build/fuzz/findings/$t
  mkdir -p "$corpus" "$findings"
  echo "[fuzz] $t for ${SECONDS_PER_TARGET}s"
  # One process, one job: a finding stops the target and keeps its input.
  if ! build/fuzz/bin/oomguard_fuzz_"$t" -max_total_time="$SECONDS_PER_TARGET" -max_len=4096 \
      -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$findings/" \
      "$corpus" "tests/fuzz/corpus/$t" 2>"build/fuzz/$t.log"; then
    echo "[fuzz] $t: FINDING, see build/fuzz/$t.log and $findings/" >&2
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added" "build/fuzz/$t.log" |
    sed "s/^/[fuzz] $t /"
  tail -n 1 "build/fuzz/$t.log" | sed "s/^/[fuzz] $t /"
done
exit $status
