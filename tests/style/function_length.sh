#!/usr/bin/env bash
# function_length.sh ROOT: no function in ROOT's harness/, models/ and data/ is longer than 80
# lines, as lizard (ci/tools-requirements.txt) counts them: the signature to the closing
# brace. A function may be forgiven with a `// #lizard forgives(length)` comment inside it
# and a reason beside (the pickle reader's opcode switch). 77 (skipped) without the checkers'
# venv (ci/install-tools.sh).
set -euo pipefail
root=$1
lizard=${OOMGUARD_TOOLS_BIN:+$OOMGUARD_TOOLS_BIN/lizard}
if [ -z "$lizard" ] || [ ! -x "$lizard" ]; then
  echo "SKIP: no lizard (ci/install-tools.sh installs it)"
  exit 77
fi
check() { "$lizard" --languages cpp --CCN 100000 --arguments 1000 --length 80 --warnings_only "$@"; }

# The check itself fails on a function of 81 lines and passes one of 80.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
function_of() {  # function_of LINES: a C++ function that long, signature to closing brace
  echo "int f() {"
  for ((i = 0; i < $1 - 3; ++i)); do echo "  int x$i = $i;"; done
  echo "  return 0;"
  echo "}"
}
function_of 81 >"$dir/long.cpp"
function_of 80 >"$dir/fits.cpp"
if check "$dir/long.cpp" >/dev/null; then
  echo "FAIL: lizard did not flag a function of 81 lines"
  exit 1
fi
check "$dir/fits.cpp" >/dev/null || {
  echo "FAIL: lizard flagged a function of 80 lines"
  exit 1
}

cd "$root"
if ! check harness models data; then
  echo "FAIL: the functions above are longer than 80 lines: split them into named steps"
  exit 1
fi
echo "ok: no function in harness/, models/ or data/ is longer than 80 lines"
