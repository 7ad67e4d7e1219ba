#!/usr/bin/env bash
# pr-comment.sh MARKDOWN_FILE: puts MARKDOWN_FILE on a pull request as ONE comment, found again
# by the marker line <!-- oomguard-memory-diff -->: the first of the pull request's comments
# with that line (alone on a line: a quote of it does not count) is updated, else one is made,
# so a push never adds a second. The marker is put first when the file lacks it. Through the
# gh CLI (`gh api`) with GH_TOKEN, GITHUB_REPOSITORY (owner/name) and PR_NUMBER.
# A token that may not write is no failure: pull requests from forks get a read-only
# GITHUB_TOKEN and the API answers 403; a ::notice:: then says that the table is in the step
# summary and what the comment needs, and the exit status is 0.
# Exit: 0 made, updated, or not allowed to; 1 another API error; 2 bad arguments or environment.
set -euo pipefail
marker='<!-- oomguard-memory-diff -->'
if [ $# != 1 ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
die() { echo "pr-comment: $*" >&2; exit 2; }
file=$1
if ! [ -f "$file" ] || ! [ -r "$file" ]; then
  die "$file: no such file (the Markdown to post)"
fi
for name in GH_TOKEN GITHUB_REPOSITORY PR_NUMBER; do
  [ -n "${!name:-}" ] || die "$name is not set (GH_TOKEN, GITHUB_REPOSITORY and PR_NUMBER are needed)"
done
[[ "$PR_NUMBER" =~ ^[1-9][0-9]*$ ]] || die "PR_NUMBER is '$PR_NUMBER': give the pull request's number"
[[ "$GITHUB_REPOSITORY" =~ ^[^/[:space:]]+/[^/[:space:]]+$ ]] ||
  die "GITHUB_REPOSITORY is '$GITHUB_REPOSITORY': give owner/name"
command -v gh > /dev/null || die "the gh CLI is not on PATH (GitHub's runners have it; https://cli.github.com)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The request body: the marker first unless the file has it; GitHub takes at most 65,536
# characters, so a longer table is cut, saying where the whole of it is.
python3 - "$file" "$marker" > "$tmp/request.json" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
marker = sys.argv[2]
if marker not in (line.strip() for line in text.splitlines()):
    text = marker + "\n" + text
limit = 65536
if len(text) > limit:
    note = "\n\n... (cut: the whole table is in the workflow run's step summary and artifact)\n"
    text = text[: limit - len(note)] + note
json.dump({"body": text}, sys.stdout)
PY

# gh api ARGS...: the answer in $tmp/answer.json; a 403 ends the script with the notice.
api() {
  local rc=0
  gh api "$@" > "$tmp/answer.json" 2> "$tmp/error.txt" || rc=$?
  [ "$rc" = 0 ] && return 0
  cat "$tmp/error.txt" >&2
  if grep -q 'HTTP 403' "$tmp/error.txt"; then
    echo "::notice title=Memory changes: no pull-request comment::This token may not comment on pull request #$PR_NUMBER (HTTP 403; a pull request from a fork gets a read-only GITHUB_TOKEN). The table is in this run's step summary. A comment needs a token with pull-requests: write, or a workflow_run follow-up workflow that posts it."
    exit 0
  fi
  echo "pr-comment: gh api $* exited $rc" >&2
  exit 1
}

api --paginate "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments?per_page=100"
# --paginate prints one JSON array per page, one after the other.
id=$(python3 - "$tmp/answer.json" "$marker" <<'PY'
import json, sys
text = open(sys.argv[1], encoding="utf-8").read()
marker = sys.argv[2]
decoder, pos, comments = json.JSONDecoder(), 0, []
while True:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos == len(text):
        break
    page, pos = decoder.raw_decode(text, pos)
    comments.extend(page if isinstance(page, list) else [page])
for c in comments:
    if marker in (line.strip() for line in (c.get("body") or "").splitlines()):
        print(c["id"])
        break
PY
)
if [ -n "$id" ]; then
  api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" --input "$tmp/request.json"
  what="updated comment $id"
else
  api --method POST "repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments" --input "$tmp/request.json"
  what="made a comment"
fi
url=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("html_url", ""))' \
  "$tmp/answer.json" 2> /dev/null || true)
echo "pr-comment: $what on pull request #$PR_NUMBER${url:+: $url}"
