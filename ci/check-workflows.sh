#!/usr/bin/env bash
# Checks .github/workflows/*.yml twice: against GitHub's workflow schema (check-jsonschema;
# the local actions in .github/actions/ against the action schema) and with actionlint, which also runs shellcheck on every `run:` script and knows which
# action majors still run on GitHub's runners. The self-hosted labels are declared in
# .github/actionlint.yaml. Any finding fails.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$(ci/install-tools.sh)
shellcheck=$(command -v shellcheck) || {
  echo "[workflows] shellcheck is missing (ci/setup.sh installs it; or apt-get install shellcheck)" >&2
  exit 2
}
"$tools/check-jsonschema" --builtin-schema vendor.github-workflows .github/workflows/*.yml
"$tools/check-jsonschema" --builtin-schema vendor.github-actions .github/actions/*/action.yml
"$tools/actionlint" -shellcheck="$shellcheck" -config-file .github/actionlint.yaml
echo "[workflows] actionlint $("$tools/actionlint" --version | head -n 1), $("$shellcheck" --version | sed -n 's/^version: //p' | sed 's/^/shellcheck /'): clean"
