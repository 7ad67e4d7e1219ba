#!/usr/bin/env bash
# default_budgets_check.sh OOMGUARD FILE: data/default-budgets.json is what `oomguard run
# --print-budgets` derives (the config's CPU budgets, plus each card's cuBLAS workspaces for
# cuda:CARD), byte for byte, and a budgets file by its schema; a GPU budget is never typed in.
# Regenerate with: build/cpu/bin/oomguard run --print-budgets > data/default-budgets.json
set -u
cli=$1 file=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" run --device cpu --print-budgets > "$dir/budgets.json" || { echo "FAIL: --print-budgets"; exit 1; }
if ! cmp -s "$dir/budgets.json" "$file"; then
  diff "$file" "$dir/budgets.json"
  echo "FAIL: $file is not what oomguard run --print-budgets derives; regenerate it"
  exit 1
fi
"$(dirname "$0")/check_outputs.sh" "$file" || exit 1
python3 - "$file" <<'PY'
import json, re, sys
units = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(text):
    m = re.fullmatch(r"([0-9.]+)(B|KiB|MiB|GiB)?", text)
    return float(m.group(1)) * units[m.group(2) or "B"]
phases = json.load(open(sys.argv[1]))["budgets"]["oomguard.run"]
ws = {"t4": 8519680, "a100-40": 8519680, "a100-80": 8519680, "h200": 32 << 20}
bad = [f"{p} {card}" for p, b in phases.items() for card, per_handle in ws.items()
       if not 0 <= size(b[f"cuda:{card}"]) - size(b["cpu"]) - 2 * per_handle < 0.01 * (1 << 20)]
print("FAIL: " + ", ".join(bad) if bad else
      f"ok: {len(phases)} phases, cuda:CARD = cpu + 2 cuBLAS workspaces of the card")
sys.exit(1 if bad else 0)
PY
