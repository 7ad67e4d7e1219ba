#!/usr/bin/env bash
# ci/check-no-toolkit.sh [COMMAND...]: oomguard set up from nothing where its users run it,
# with no CUDA toolkit. In a fresh clone of this checkout's HEAD, with an empty HOME (so no
# venv, pip or ccache cache) and the CUDA toolkit hidden (a private mount namespace: an
# empty folder bind-mounted over every /usr/local/cuda*, CUDA_HOME, CUDA_PATH, CUDACXX and
# LIBRARY_PATH unset, nvcc's folders off PATH), it runs COMMAND (default: ci/run-smoke.sh,
# the README's first command) and prints its time and the size of what it wrote under HOME.
# Fails when the command fails, or when nvcc is still found.
#   OOMGUARD_NO_TOOLKIT_KEEP=1   keep the clone and HOME (printed) instead of removing them
# Needs root for the mount namespace (unshare --mount); elsewhere it says so and exits 77.
# GitHub's ubuntu runners need none of this: they have no toolkit (ci.yml, job no-toolkit).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

if [ "${1:-}" != --inside ]; then
  if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null ||
     ! unshare --mount --propagation private true 2>/dev/null; then
    echo "check-no-toolkit: needs root, unshare(1) and mount namespaces to hide the CUDA" \
      "toolkit; skipped" >&2
    exit 77
  fi
  exec unshare --mount --propagation private -- "$0" --inside "$@"
fi
shift

empty=$(mktemp -d /tmp/oomguard-no-toolkit-empty.XXXXXX)
hide() {  # hide WHAT: an empty folder or file bind-mounted over it; 77 where that is refused
  mount --bind "$2" "$1" 2>/dev/null || {
    echo "check-no-toolkit: cannot bind-mount over $1 (no mount permission); skipped" >&2
    exit 77
  }
}
for d in /usr/local/cuda*; do
  if [ -d "$d" ] && [ ! -L "$d" ]; then hide "$d" "$empty"; fi
done
# Wrappers that call into the toolkit from elsewhere on PATH (/usr/local/bin/nvcc) too:
# covered by an empty, non-executable file.
: > "$empty.file"
chmod 644 "$empty.file"
for dir in $(printf '%s' "$PATH" | tr ':' ' '); do
  for tool in nvcc ptxas nvlink fatbinary cudafe++ bin2c __nvcc_device_query; do
    if [ -f "$dir/$tool" ]; then hide "$dir/$tool" "$empty.file"; fi
  done
done
unset CUDA_HOME CUDA_PATH CUDACXX LIBRARY_PATH CPATH
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -vi cuda | paste -sd: -)
export PATH
for dir in $(printf '%s' "$PATH" | tr ':' ' '); do
  if [ -x "$dir/nvcc" ]; then
    echo "check-no-toolkit: $dir/nvcc is still there: cannot hide the toolkit" >&2
    exit 1
  fi
done

work=$(mktemp -d /tmp/oomguard-no-toolkit.XXXXXX)
[ "${OOMGUARD_NO_TOOLKIT_KEEP:-0}" = 1 ] || trap 'rm -rf "$work" "$empty" "$empty.file"' EXIT
git clone -q "$here" "$work/clone"
mkdir -p "$work/home"
cmd=("$@")
[ ${#cmd[@]} -gt 0 ] || cmd=(ci/run-smoke.sh)
echo "[no-toolkit] ${cmd[*]} in a fresh clone of $(git -C "$here" rev-parse --short HEAD)," \
  "HOME empty, no CUDA toolkit"
start=$(date +%s)
rc=0
# As a new user's shell: none of oomguard's settings or caches of the caller's.
(cd "$work/clone" && env -u OOMGUARD_CACHE -u CCACHE_DIR -u OOMGUARD_CUDA -u OOMGUARD_DEVICE \
  -u OOMGUARD_TORCH_VERSION -u OOMGUARD_PRESET -u OOMGUARD_SETUP -u OOMGUARD_BUILD_TARGETS \
  -u LD_LIBRARY_PATH HOME="$work/home" "${cmd[@]}") || rc=$?
seconds=$(( $(date +%s) - start ))
size=$(du -sh "$work/home" | cut -f1)
echo "[no-toolkit] exit $rc in $((seconds / 60)) min $((seconds % 60)) s; under HOME: $size" \
  "($(du -sh "$work/home"/.cache/oomguard/* 2>/dev/null | awk '{printf "%s %s; ", $2, $1}' |
    sed "s|$work/home/.cache/oomguard/||g"))"
[ "${OOMGUARD_NO_TOOLKIT_KEEP:-0}" = 1 ] && echo "[no-toolkit] kept: $work"
exit $rc
