#!/usr/bin/env bash
# Fills third_party/ (git-ignored) from this machine's Debian packages: the headers of
# nlohmann-json, CLI11, spdlog and fmt, and GoogleTest's sources. A machine that has only
# PyTorch, CUDA and a compiler then builds oomguard from the tree alone (ci/gpu-sanity.sh);
# copy third_party/ along with the checkout. Google Benchmark is left out: the sanity run
# needs no benchmarks. Builds nothing; exit 2 naming the packages to install when one is
# missing (ci/setup.sh installs them all).
set -euo pipefail
cd "$(dirname "$0")/.."
sources=(/usr/include/nlohmann /usr/include/CLI /usr/include/spdlog /usr/include/fmt
  /usr/src/googletest/CMakeLists.txt)
for s in "${sources[@]}"; do
  [ -e "$s" ] || {
    echo "vendor-deps: $s is missing: apt-get install nlohmann-json3-dev libcli11-dev" \
      "libspdlog-dev libgtest-dev (or run ci/setup.sh)" >&2
    exit 2
  }
done
rm -rf third_party
mkdir -p third_party/include
for d in nlohmann CLI spdlog fmt; do
  cp -r "/usr/include/$d" third_party/include/
done
cp -r /usr/src/googletest third_party/googletest
echo "third_party/: $(du -sh third_party | cut -f1) (nlohmann, CLI11, spdlog, fmt, googletest)"
