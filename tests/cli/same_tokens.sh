#!/usr/bin/env bash
# same_tokens.sh OOMGUARD: the default run (static KV cache) and generate.cache=none (the
# whole context recomputed every step) generate the same greedy tokens.
set -euo pipefail
cli=$1
"$cli" run --report tokens_static.json >/dev/null
"$cli" run --set generate.cache=none --report tokens_none.json >/dev/null
"$(dirname "$0")/check_outputs.sh" tokens_static.json tokens_none.json
python3 - <<'PY'
import json
def tokens(path):
    phases = json.load(open(path))["phases"]
    return [p for p in phases if p["name"] == "generate"][0]["sample_tokens"]
static, none = tokens("tokens_static.json"), tokens("tokens_none.json")
assert len(static) == 64 and static == none, (static, none)
print("ok: the same", len(static), "tokens")
PY
