#!/usr/bin/env bash
# pr_comment_check.sh [PR_COMMENT_SH]: ci/pr-comment.sh (the memory-diff workflow's comment)
# against a fake `gh` first on PATH, which logs its arguments and answers canned JSON:
# - no comment with the marker line (a quote of it does not count), over two pages: one POST;
# - a marked comment on the second page: a PATCH of that comment, no POST;
# - a 403 (a fork's read-only token): exit 0 with a ::notice:: naming what the comment needs;
# - another API error: exit 1; a missing MARKDOWN_FILE: exit 2 naming it, gh never called.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=${1:-$here/../../ci/pr-comment.sh}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
marker='<!-- oomguard-memory-diff -->'

mkdir "$tmp/bin"
cat > "$tmp/bin/gh" <<'FAKE'
#!/usr/bin/env bash
# The fake gh: one line per call in calls.txt; a request body (--input) kept as input-N.json;
# GET answers comments.json, POST and PATCH a comment, or the error that `status` names.
set -eu
dir=$FAKE_GH_DIR
echo "$*" >> "$dir/calls.txt"
n=$(wc -l < "$dir/calls.txt")
[ "${1:-}" = api ] || { echo "fake gh: only api" >&2; exit 2; }
method=GET input=""
while [ $# -gt 0 ]; do
  case "$1" in
    --method|-X) method=$2; shift ;;
    --input) input=$2; shift ;;
  esac
  shift
done
[ -z "$input" ] || cp "$input" "$dir/input-$n.json"
if [ "$method" = GET ]; then
  cat "$dir/comments.json"
  exit 0
fi
case "$(cat "$dir/status" 2> /dev/null || echo 200)" in
  403)
    echo '{"message":"Resource not accessible by integration","status":"403"}'
    echo "gh: Resource not accessible by integration (HTTP 403)" >&2
    exit 1 ;;
  500)
    echo '{"message":"Server Error"}'
    echo "gh: Server Error (HTTP 500)" >&2
    exit 1 ;;
esac
echo '{"id": 999, "html_url": "https://github.com/octo/repo/pull/7#issuecomment-999"}'
FAKE
chmod +x "$tmp/bin/gh"

# run CASE MARKDOWN: pr-comment.sh in a case folder (comments.json, status already there);
# its exit status in $rc, its output in CASE/out.txt.
run() {
  local dir=$tmp/$1
  touch "$dir/calls.txt"
  rc=0
  PATH="$tmp/bin:$PATH" FAKE_GH_DIR=$dir GH_TOKEN=fake GITHUB_REPOSITORY=octo/repo PR_NUMBER=7 \
    "$script" "$2" > "$dir/out.txt" 2>&1 || rc=$?
}
calls() { grep -c -- "$2" "$tmp/$1/calls.txt" || true; }
show() { echo "--- output"; cat "$tmp/$1/out.txt"; echo "--- gh calls"; cat "$tmp/$1/calls.txt"; }

printf '### Memory changes\n\n| phase | base | head |\n|---|---|---|\n| train | 27MiB | 28MiB |\n' \
  > "$tmp/table.md"
{ echo "$marker"; cat "$tmp/table.md"; } > "$tmp/marked.md"

# 1. No marked comment (the second page's quotes the marker): one POST, the marker put first.
mkdir "$tmp/new"
printf '[{"id": 101, "body": "LGTM"}]\n[{"id": 102, "body": "> %s\\n> old table"}]\n' \
  "$marker" > "$tmp/new/comments.json"
run new "$tmp/table.md"
[ "$rc" = 0 ] || { show new; fail "no marked comment: exit $rc, expected 0"; }
grep -q -- "--paginate repos/octo/repo/issues/7/comments" "$tmp/new/calls.txt" ||
  { show new; fail "the comments are not listed with --paginate"; }
[ "$(calls new 'POST repos/octo/repo/issues/7/comments')" = 1 ] ||
  { show new; fail "no marked comment: not exactly one POST to the pull request's comments"; }
[ "$(calls new PATCH)" = 0 ] || { show new; fail "no marked comment: a PATCH (of the quote?)"; }
python3 - "$tmp/new/input-2.json" "$marker" "$tmp/table.md" <<'PY' || { show new; fail "the POSTed body"; }
import json, sys
body = json.load(open(sys.argv[1]))["body"]
lines = body.splitlines()
assert lines[0] == sys.argv[2], lines[:2]
assert body.endswith(open(sys.argv[3]).read()), body
assert lines.count(sys.argv[2]) == 1, body
PY
echo "ok: no marked comment -> one POST, the marker first"

# 2. A marked comment on the second page (and a later one): PATCH the first, no POST.
mkdir "$tmp/old"
printf '[{"id": 101, "body": "LGTM"}]\n[{"id": 202, "body": "%s\\nold table"}, {"id": 303, "body": "%s\\nanother"}]\n' \
  "$marker" "$marker" > "$tmp/old/comments.json"
run old "$tmp/marked.md"
[ "$rc" = 0 ] || { show old; fail "a marked comment: exit $rc, expected 0"; }
[ "$(calls old 'PATCH repos/octo/repo/issues/comments/202')" = 1 ] ||
  { show old; fail "a marked comment: comment 202 is not PATCHed once"; }
[ "$(calls old POST)" = 0 ] || { show old; fail "a marked comment: a second comment was POSTed"; }
[ "$(calls old 'comments/303')" = 0 ] || { show old; fail "the later marked comment was touched"; }
python3 - "$tmp/old/input-2.json" "$marker" "$tmp/marked.md" <<'PY' || { show old; fail "the PATCHed body"; }
import json, sys
body = json.load(open(sys.argv[1]))["body"]
assert body == open(sys.argv[3]).read(), body
assert body.splitlines().count(sys.argv[2]) == 1, body
PY
echo "ok: a marked comment -> PATCH of that id, no POST"

# 3. The token may not write (a fork's pull request): exit 0 with the notice.
mkdir "$tmp/fork"
echo '[]' > "$tmp/fork/comments.json"
echo 403 > "$tmp/fork/status"
run fork "$tmp/table.md"
[ "$rc" = 0 ] || { show fork; fail "HTTP 403: exit $rc, expected 0"; }
grep -q '^::notice.*step summary.*pull-requests: write' "$tmp/fork/out.txt" ||
  { show fork; fail "HTTP 403: no ::notice:: naming the step summary and pull-requests: write"; }
[ "$(calls fork POST)" = 1 ] || { show fork; fail "HTTP 403: expected the one POST tried"; }
echo "ok: HTTP 403 -> exit 0 with the notice"

# 4. Another API error fails.
mkdir "$tmp/error"
echo '[]' > "$tmp/error/comments.json"
echo 500 > "$tmp/error/status"
run error "$tmp/table.md"
[ "$rc" = 1 ] || { show error; fail "HTTP 500: exit $rc, expected 1"; }
! grep -q '::notice' "$tmp/error/out.txt" || { show error; fail "HTTP 500 taken for a 403"; }
echo "ok: HTTP 500 -> exit 1"

# 5. No Markdown file: exit 2 naming it, gh never called.
mkdir "$tmp/missing"
echo '[]' > "$tmp/missing/comments.json"
run missing "$tmp/nothing.md"
[ "$rc" = 2 ] || { show missing; fail "a missing MARKDOWN_FILE: exit $rc, expected 2"; }
grep -q "nothing.md: no such file" "$tmp/missing/out.txt" ||
  { show missing; fail "a missing MARKDOWN_FILE is not named"; }
[ ! -s "$tmp/missing/calls.txt" ] || { show missing; fail "gh was called without a MARKDOWN_FILE"; }
echo "ok: a missing MARKDOWN_FILE -> exit 2 naming it"
