#!/usr/bin/env bash
# same_tokens.sh OOMGUARD: the default run (static KV cache) and generate.cache=none (the
# whole context recomputed every step) generate the same greedy tokens. Two training steps and
# one evaluation batch: the tokens of any weights must agree, so the rest of a run is not needed.
set -euo pipefail
cli=$1
short=(--set train.steps=2 --set evaluate.batches=1)
"$cli" run "${short[@]}" --report tokens_static.json >/dev/null
"$cli" run "${short[@]}" --set generate.cache=none --report tokens_none.json >/dev/null
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
