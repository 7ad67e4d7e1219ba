#!/usr/bin/env bash
# exit_codes_check.sh OOMGUARD DESIGN.md: walks DESIGN.md's exit-code table. Every code the
# table lists has a case here that must end with it; a listed code without a case, or a case
# whose code the table does not list, fails. Code 5 (a CUDA error other than out-of-memory)
# can only happen on a device: without one its case says so and is not run.
set -u
cli=$1
design=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export CUDA_VISIBLE_DEVICES=
failed=0
fail() { echo "FAIL: $*"; failed=1; }

listed=$(sed -n '/^- Exit codes/,/^- Interruption/p' "$design" | grep -oE '^  \| [0-9]+ \|' |
  grep -oE '[0-9]+' | sort -n | tr '\n' ' ')
[ -n "$listed" ] || { echo "FAIL: no exit-code table found in $design"; exit 1; }
echo "DESIGN.md lists exit codes: $listed"

# expect CODE TEXT CMD...: CMD exits CODE and its output (stdout and stderr) contains TEXT.
expect() {
  local want=$1 text=$2
  shift 2
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    fail "$*: exit $rc, expected $want: $(printf '%s\n' "$out" | tail -3)"
  elif [[ "$out" != *"$text"* ]]; then
    fail "$*: exit $rc as expected, but no \"$text\" in: $(printf '%s\n' "$out" | tail -3)"
  else
    echo "ok: exit $rc: $*"
  fi
}

# Reports larger than 1 KiB cannot be written under this limit: a failure after the run.
# SIGXFSZ ignored, so that the write fails with EFBIG instead of killing the process.
# shellcheck disable=SC2317  # called by expect, through "$@"
small_files() { (trap '' XFSZ; ulimit -f 1; "$@"); }

for code in $listed; do
  case $code in
    0)
      expect 0 "outcome: pass" "$cli" run --set train.steps=2 --report "$dir/pass.json"
      expect 0 "outcome: no change" "$cli" compare "$dir/pass.json" "$dir/pass.json"
      # The run passed; its report could not be written: named, and the code stays 0.
      expect 0 "report $dir/r-big.json not written" \
        small_files "$cli" run --set train.steps=2 --report "$dir/r-big.json" ;;
    1)
      expect 1 "outcome: budget_exceeded" "$cli" run --disable-guard no_grad_eval \
        --set train.steps=2 --report "$dir/over.json"
      expect 1 "over the limit 5%" "$cli" compare "$dir/pass.json" "$dir/over.json" \
        --fail-above 5% ;;
    2)
      expect 2 "model.nope" "$cli" run --set model.nope=1
      expect 2 "no test reports in this folder" "$cli" compare "$dir/pass.json" "$dir" ;;
    3)
      expect 3 "outcome: oom" "$cli" run --capacity 1MiB --report "$dir/oom.json"
      # A report that cannot be written after an OOM does not hide the OOM's 3.
      expect 3 "the run's outcome stands: oom" \
        small_files "$cli" run --capacity 1MiB --report "$dir/oom-big.json" ;;
    4)
      "$cli" run --set train.steps=100000 --report "$dir/int.json" > "$dir/int.log" 2>&1 &
      pid=$!
      for _ in $(seq 1 100); do grep -q "phase=train\|oomguard run:" "$dir/int.log" && break; sleep 0.1; done
      sleep 1
      kill -TERM "$pid"
      wait "$pid"; rc=$?
      if [ "$rc" = 4 ] && grep -q '"outcome": "interrupted"' "$dir/int.json"; then
        echo "ok: exit 4: run interrupted by SIGTERM, report written"
      else
        fail "interrupted run: exit $rc, expected 4 with an interrupted report"
      fi ;;
    5)
      echo "not run: exit 5 needs a CUDA device error (CUDA_VISIBLE_DEVICES is empty here)" ;;
    6)
      expect 6 "internal error" env TMPDIR="$dir/no/such/dir" "$cli" repeat -n 1 ;;
    7)
      expect 7 "phase generate needs aten::eq, which cannot run on shapes alone" \
        "$cli" run --device meta --card t4 --set train.steps=1 --set evaluate.batches=1 \
        --set generate.stop_at_eos=true --report "$dir/unsupported.json"
      grep -q '"outcome": "unsupported"' "$dir/unsupported.json" ||
        fail "exit 7: the report does not say unsupported" ;;
    *)
      fail "DESIGN.md lists exit code $code, and this walk has no case for it" ;;
  esac
done
for code in 0 1 2 3 4 5 6 7; do
  [[ " $listed " == *" $code "* ]] || fail "exit code $code has a case here but no row in DESIGN.md"
done
exit $failed
