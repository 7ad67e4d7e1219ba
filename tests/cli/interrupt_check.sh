#!/usr/bin/env bash
# interrupt_check.sh OOMGUARD: SIGINT ends a run with exit 4 and its report written (outcome
# "interrupted"); SIGTERM to repeat ends the running run the same way and writes the summary.
set -u
cli=$1
long=(--set train.steps=1000000)

# expect_interrupted SIGNAL DELAY REPORT ARGS...: starts oomguard ARGS --report REPORT, sends
# SIGNAL after DELAY seconds, and checks exit 4 and an interrupted outcome in REPORT.
expect_interrupted() {
  local signal=$1 delay=$2 report=$3; shift 3
  rm -f "$report"
  "$cli" "$@" --report "$report" > "$report.log" 2>&1 &
  local pid=$!
  sleep "$delay"
  kill "-$signal" "$pid"
  wait "$pid"; local rc=$?
  [ "$rc" = 4 ] || { echo "$1: exit code $rc after SIG$signal, expected 4"; exit 1; }
  grep -q '"outcome": "interrupted"' "$report" || { echo "$1: $report has no interrupted run"; exit 1; }
  "$(dirname "$0")/check_outputs.sh" "$report" || exit 1
}

expect_interrupted INT 3 interrupted.json run "${long[@]}"
expect_interrupted TERM 4 repeat_interrupted.json repeat -n 3 "${long[@]}"
echo "ok: run and repeat end with exit 4 and write their reports"
