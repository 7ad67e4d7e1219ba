#!/usr/bin/env bash
# interrupt_check.sh OOMGUARD: SIGINT ends a run with exit 4 and its report written (outcome
# "interrupted"); SIGTERM to repeat ends the running run the same way and writes the summary.
set -u
cli=$1
long=(--set train.steps=1000000)
fail() { echo "$*"; exit 1; }

rm -f interrupted.json
"$cli" run "${long[@]}" --report interrupted.json > interrupted.log 2>&1 &
pid=$!
sleep 3
kill -INT "$pid"
wait "$pid"; rc=$?
[ "$rc" = 4 ] || fail "run: exit code $rc after SIGINT, expected 4"
grep -q '"outcome": "interrupted"' interrupted.json || fail "run: report outcome is not interrupted"

rm -f repeat_interrupted.json
"$cli" repeat -n 3 --report repeat_interrupted.json "${long[@]}" > repeat_interrupted.log 2>&1 &
pid=$!
sleep 4
kill -TERM "$pid"
wait "$pid"; rc=$?
[ "$rc" = 4 ] || fail "repeat: exit code $rc after SIGTERM, expected 4"
grep -q '"outcome": "interrupted"' repeat_interrupted.json || fail "repeat: no interrupted run in the summary"
echo "ok: run and repeat end with exit 4 and write their reports"
