#pragma once
// What the fuzz targets share: the libFuzzer entry point and a check that ends the process
// (a finding) when a contract breaks.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace oomguard::fuzz {

inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "contract broken: %s\n", what);
    std::abort();
  }
}

}  // namespace oomguard::fuzz
