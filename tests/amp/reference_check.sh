#!/usr/bin/env bash
# reference_check.sh PYTHON: PyTorch itself (PYTHON: the project's venv with torch) gives the
# figures tests/amp/autocast_reference.json records, those the default suite holds oomguard's
# predictions to (autocast_check.sh). Slow by nature (PyTorch is imported and traces six
# models): run behind OOMGUARD_SLOW. A new pinned torch that moves a figure fails here; then
# write the file again with autocast_reference.py and look at why it moved.
set -euo pipefail
python=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Run only with the slow opt-in, whose set-up installs what torch's Python needs: a torch that
# does not import fails here rather than leave the check out.
if ! "$python" -c "import torch.distributed._tools.mem_tracker" > "$tmp/import.txt" 2>&1; then
  tail -n 3 "$tmp/import.txt"
  echo "FAIL: $python cannot import torch with MemTracker: OOMGUARD_SLOW=1 ci/setup.sh installs what it needs"
  exit 1
fi
"$python" "$here/autocast_reference.py" > "$tmp/reference.json" 2> "$tmp/reference.txt" ||
  { cat "$tmp/reference.txt"; echo "FAIL: PyTorch's reference did not run"; exit 1; }
diff -u "$here/autocast_reference.json" "$tmp/reference.json" ||
  { echo "FAIL: PyTorch's figures are not those recorded in autocast_reference.json"; exit 1; }
echo "PyTorch $("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null) gives the recorded figures"
