#!/usr/bin/env bash
# All set-up: system packages, the pinned LibTorch (PyPI's torch wheel, in a virtual
# environment cached outside the clone), the checkers (ci/install-tools.sh), configure and
# build of preset cpu (OOMGUARD_PRESET picks another; OOMGUARD_BUILD_TARGETS, space-separated,
# builds only those). Safe to run again: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.15.0
CACHE=${OOMGUARD_CACHE:-$HOME/.cache/oomguard}
VENV=$CACHE/venv-torch-$TORCH_VERSION
PRESET=${OOMGUARD_PRESET:-cpu}
APT_PACKAGES=(cmake ninja-build ccache g++ python3-venv libgtest-dev libbenchmark-dev
  libspdlog-dev nlohmann-json3-dev libcli11-dev shellcheck librsvg2-bin)

log() { echo "[setup] $*"; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
  log "installing torch==$TORCH_VERSION into $VENV (downloads cached in $CACHE/pip)"
  mkdir -p "$CACHE"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  PIP_CACHE_DIR=$CACHE/pip "$VENV/bin/pip" install -q "torch==$TORCH_VERSION"
fi
log "LibTorch: torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) in $VENV"

tools=$(ci/install-tools.sh)
log "checkers (check-jsonschema, actionlint, junitparser) in $tools"

export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_BASEDIR=$PWD
if [ ! -f "build/$PRESET/build.ninja" ]; then
  log "configuring preset $PRESET"
  # Kept in the cache: a later plain `cmake --preset` finds the same LibTorch.
  cmake --preset "$PRESET" -DOOMGUARD_TORCH_PYTHON="$VENV/bin/python" >/dev/null
fi
log "building preset $PRESET"
targets=()
for t in ${OOMGUARD_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build --preset "$PRESET" -j "$(nproc)" "${targets[@]}"
