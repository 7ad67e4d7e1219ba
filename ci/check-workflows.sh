#!/usr/bin/env bash
# Validates .github/workflows/*.yml against GitHub's workflow schema with check-jsonschema
# (PyPI; installed once into a virtual environment next to the LibTorch one).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${OOMGUARD_CACHE:-$HOME/.cache/oomguard}
TOOLS=$CACHE/venv-tools
if [ ! -x "$TOOLS/bin/check-jsonschema" ]; then
  echo "[workflows] installing check-jsonschema into $TOOLS"
  python3 -m venv "$TOOLS"
  PIP_CACHE_DIR=$CACHE/pip "$TOOLS/bin/pip" install -q check-jsonschema
fi
"$TOOLS/bin/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml
