#!/usr/bin/env bash
# Installs the checkers of ci/tools-requirements.txt into a virtual environment under
# ~/.cache/oomguard (once; again when that file changes) and prints the environment's bin
# directory. ci/setup.sh runs it, so CMake finds the tools and the schema tests run.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${OOMGUARD_CACHE:-$HOME/.cache/oomguard}
TOOLS=$CACHE/venv-tools
want=$(sha256sum ci/tools-requirements.txt | cut -d' ' -f1)
if [ "$(cat "$TOOLS/requirements.sha256" 2>/dev/null)" != "$want" ]; then
  echo "[tools] installing ci/tools-requirements.txt into $TOOLS" >&2
  rm -rf "$TOOLS"
  python3 -m venv "$TOOLS"
  PIP_CACHE_DIR=$CACHE/pip "$TOOLS/bin/pip" install -q -r ci/tools-requirements.txt >&2
  echo "$want" > "$TOOLS/requirements.sha256"
fi
echo "$TOOLS/bin"
