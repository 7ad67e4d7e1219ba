#!/usr/bin/env bash
# expect_exit.sh CODE CMD... [--expect-report OUTCOME]: runs CMD, checks its exit code and,
# when asked, that the report given with --report has that outcome. A report CMD wrote must
# match its schema (check_outputs.sh).
set -u
want=$1; shift
args=(); outcome=""; report=""
while [ $# -gt 0 ]; do
  case "$1" in
    --expect-report) outcome=$2; shift 2 ;;
    --report) report=$2; args+=("$1" "$2"); shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
[ -n "$report" ] && rm -f "$report"
"${args[@]}"; rc=$?
if [ "$rc" != "$want" ]; then echo "exit code $rc, expected $want"; exit 1; fi
if [ -n "$outcome" ]; then
  grep -q "\"outcome\": \"$outcome\"" "$report" || { echo "report $report: outcome is not $outcome"; exit 1; }
fi
if [ -n "$report" ] && [ -e "$report" ]; then
  "$(dirname "$0")/check_outputs.sh" "$report" || exit 1
fi
echo "ok: exit $rc"
