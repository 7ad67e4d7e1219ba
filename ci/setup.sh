#!/usr/bin/env bash
# All set-up: system packages, the pinned LibTorch (PyPI's torch wheel, in a virtual
# environment cached outside the clone), the checkers (ci/install-tools.sh), configure and
# build of preset cpu. Safe to run again: each step is skipped when its result is already
# there. A CUDA toolkit is not needed (DESIGN.md, "LibTorch without a CUDA toolkit").
#   OOMGUARD_PRESET         the preset to configure and build (default cpu)
#   OOMGUARD_BUILD_TARGETS  space-separated targets to build (default: all of the preset)
#   OOMGUARD_SETUP=smoke    only what `oomguard run` needs: fewer packages, no checkers
#   OOMGUARD_CUDA           auto (default): the whole wheel and the CUDA meter where a CUDA
#                           toolkit is found, its CPU half where none is; on; off
#   OOMGUARD_TORCH_VERSION  another torch from PyPI than the pinned one (its own venv and
#                           build folder, build/<preset>-torch-<version>)
#   OOMGUARD_CACHE          where venvs and ccache live (default ~/.cache/oomguard)
#   OOMGUARD_SLOW=1         (the README's test command) PyTorch's own Python runs in the slow
#                           checks, and it loads the wheel's CUDA half: every requirement of the
#                           wheel is installed, toolkit or not (3 GB more), beside the build
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.15.0
PINNED_TORCH_VERSION=$TORCH_VERSION
[ -n "${OOMGUARD_TORCH_VERSION:-}" ] && TORCH_VERSION=$OOMGUARD_TORCH_VERSION
CACHE=${OOMGUARD_CACHE:-$HOME/.cache/oomguard}
VENV=$CACHE/venv-torch-$TORCH_VERSION
PRESET=${OOMGUARD_PRESET:-cpu}
BUILD_DIR=build/$PRESET
[ "$TORCH_VERSION" = "$PINNED_TORCH_VERSION" ] || BUILD_DIR=build/$PRESET-torch-$TORCH_VERSION
SETUP=${OOMGUARD_SETUP:-all}
APT_PACKAGES=(cmake ninja-build ccache g++ python3-venv libgtest-dev libspdlog-dev
  nlohmann-json3-dev libcli11-dev)
[ "$SETUP" = smoke ] || APT_PACKAGES+=(libbenchmark-dev shellcheck librsvg2-bin)
# The sanitizer presets build with clang: at -O0 under ASan + UBSan it compiles the Torch code
# in under half GCC's time (ci/README.md). Its runtimes: libclang-rt of its version, below.
SANITIZER_PRESET=0
case "$PRESET" in asan|fuzz) SANITIZER_PRESET=1; APT_PACKAGES+=(clang) ;; esac

log() { echo "[setup $(date +%H:%M:%S)] $*"; }
die() { echo "setup: $*" >&2; exit 2; }
case "$SETUP" in all|smoke) ;; *) die "OOMGUARD_SETUP is '$SETUP': give all or smoke" ;; esac

apt_install() {  # PACKAGE...: those not installed yet
  local missing=() p sudo=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  log "installing ${missing[*]}"
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}
apt_install "${APT_PACKAGES[@]}"
if [ "$SANITIZER_PRESET" = 1 ]; then
  # Debian 12 and Ubuntu 24.04 ship clang's sanitizer runtimes apart (libclang-rt-N-dev);
  # older releases have them in a package clang already depends on.
  clang_rt=libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev
  if apt-cache show "$clang_rt" > /dev/null 2>&1; then apt_install "$clang_rt"; fi
fi

# The CUDA toolkit decides which half of the wheel is linked: its CPU half needs two small
# NVIDIA libraries (libcudart, libcupti), the whole wheel all of them (ci/torch_deps.py).
nvcc=""
for d in "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda; do
  [ -n "$d" ] && [ -x "$d/bin/nvcc" ] && { nvcc=$d/bin/nvcc; break; }
done
if [ -z "$nvcc" ]; then  # the first executable nvcc on PATH (command -v also names others)
  for d in $(printf '%s' "$PATH" | tr ':' ' '); do
    [ -x "$d/nvcc" ] && [ -f "$d/nvcc" ] && { nvcc=$d/nvcc; break; }
  done
fi
# CUDA: what CMake's OOMGUARD_CUDA is given (AUTO finds the same toolkit, and finds one
# installed later when configured again); DEPS: which half of the wheel's libraries to install.
case "${OOMGUARD_CUDA:-auto}" in
  auto|AUTO) CUDA=AUTO ;;
  on|ON) [ -n "$nvcc" ] || die "OOMGUARD_CUDA=on but no CUDA toolkit (nvcc) is found"; CUDA=ON ;;
  off|OFF) CUDA=OFF ;;
  *) die "OOMGUARD_CUDA is '$OOMGUARD_CUDA': give auto, on or off" ;;
esac
DEPS=cpu
[ "$CUDA" != OFF ] && [ -n "$nvcc" ] && DEPS=cuda

# The checkers' venv installs beside LibTorch's: each pip spends most of its time on one core.
tools_pid=""
if [ "$SETUP" = all ]; then
  mkdir -p "$CACHE"
  tools_out=$(mktemp)
  ci/install-tools.sh > "$tools_out" &
  tools_pid=$!
fi

if [ ! -f "$VENV/.oomguard-torch-$DEPS" ]; then
  if [ ! -f "$VENV/.oomguard-torch" ]; then
    log "installing torch==$TORCH_VERSION into $VENV (the wheel alone, without its dependencies)"
    rm -rf "$VENV"
    mkdir -p "$CACHE"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --no-cache-dir --no-deps "torch==$TORCH_VERSION"
    touch "$VENV/.oomguard-torch"
  fi
  listed=$("$VENV/bin/python" ci/torch_deps.py "$DEPS")  # a failure stops set-up here
  mapfile -t deps <<< "$listed"
  if [ -n "$listed" ]; then
    log "installing what its $DEPS half needs: ${deps[*]}"
    # --no-warn-conflicts: pip would list every requirement of torch left out on purpose.
    "$VENV/bin/pip" install -q --no-cache-dir --no-warn-conflicts "${deps[@]}"
  else
    log "its $DEPS half needs nothing more on this machine"
  fi
  touch "$VENV/.oomguard-torch-$DEPS"
  [ "$DEPS" = cuda ] && touch "$VENV/.oomguard-torch-cpu"
fi
log "LibTorch: torch $TORCH_VERSION in $VENV ($([ "$DEPS" = cuda ] &&
  echo "whole, CUDA toolkit $nvcc" || echo "CPU half: OOMGUARD_CUDA=$CUDA, toolkit ${nvcc:-none}"))"

# The slow checks import torch's Python (amp.recorded_reference_is_pytorchs: FakeTensorMode
# and MemTracker), which loads every NVIDIA library of the wheel: installed during the build,
# the build itself needing none of them.
python_pid=""
if [ "${OOMGUARD_SLOW:-0}" = 1 ] && [ ! -f "$VENV/.oomguard-torch-cuda" ]; then
  listed=$("$VENV/bin/python" ci/torch_deps.py cuda)
  mapfile -t deps <<< "$listed"
  log "installing, beside the build, what torch's Python needs (OOMGUARD_SLOW=1): ${deps[*]}"
  "$VENV/bin/pip" install -q --no-cache-dir --no-warn-conflicts "${deps[@]}" &&
    touch "$VENV/.oomguard-torch-cuda" &
  python_pid=$!
fi

if [ -n "$tools_pid" ]; then
  wait "$tools_pid" || die "installing the checkers failed (ci/install-tools.sh, above)"
  tools=$(cat "$tools_out")
  rm -f "$tools_out"
  log "checkers (check-jsonschema, actionlint, junitparser, lizard, ...) in $tools"
fi

export CCACHE_DIR=${CCACHE_DIR:-$CACHE/ccache}
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_BASEDIR=$PWD
# Configured every time (seconds when nothing changed): a toolkit or the checkers installed
# since the last set-up are then found (the smoke command's set-up has no checkers).
log "configuring preset $PRESET in $BUILD_DIR"
# Kept in the cache: a later plain `cmake --preset` finds the same LibTorch.
cmake --preset "$PRESET" -B "$BUILD_DIR" -DOOMGUARD_TORCH_PYTHON="$VENV/bin/python" \
  -DOOMGUARD_CUDA="$CUDA" >/dev/null
targets=()
for t in ${OOMGUARD_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
log "building ${OOMGUARD_BUILD_TARGETS:-preset $PRESET} in $BUILD_DIR"
if [ "$BUILD_DIR" = "build/$PRESET" ]; then
  cmake --build --preset "$PRESET" -j "$(nproc)" "${targets[@]}"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)" "${targets[@]}"
fi
if [ -n "$python_pid" ]; then
  wait "$python_pid" || die "installing what torch's Python needs failed (pip, above)"
  log "torch's Python imports: the wheel's requirements are in $VENV"
fi
log "done"
