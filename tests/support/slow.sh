#!/usr/bin/env bash
# slow.sh COMMAND...: a test that is slow by nature (it builds consumer projects, or proves a
# bound over many seeds or sizes) runs only where OOMGUARD_SLOW=1, as the README's test command
# (ci/run-tests.sh) and the CI workflows set it; elsewhere it is skipped (exit 77, ctest's
# SKIP_RETURN_CODE) saying how to run it, so that a plain `ctest` answers in minutes.
# cmake/testing.cmake's oomguard_add_slow_test puts it in front of such a test's command.
case "${OOMGUARD_SLOW:-0}" in
  1) exec "$@" ;;
  0) echo "slow test, skipped: OOMGUARD_SLOW=1 runs it (ci/run-tests.sh sets it)"; exit 77 ;;
  *) echo "OOMGUARD_SLOW is '$OOMGUARD_SLOW': give 1 (run the slow tests) or 0" >&2; exit 2 ;;
esac
