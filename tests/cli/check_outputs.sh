#!/usr/bin/env bash
# check_outputs.sh FILE...: tests/cli/check_outputs.py with the checkers' Python from
# $OOMGUARD_TOOLS_BIN (ctest sets it; ci/install-tools.sh makes the venv). Without that venv
# it says so and checks nothing; cli.outputs_match_their_schemas is then skipped.
if [ -z "${OOMGUARD_TOOLS_BIN:-}" ] || [ ! -x "$OOMGUARD_TOOLS_BIN/python" ]; then
  echo "not checked against the schemas: no checkers' venv (ci/install-tools.sh): $*"
  exit 0
fi
exec "$OOMGUARD_TOOLS_BIN/python" "$(dirname "$0")/check_outputs.py" "$@"
