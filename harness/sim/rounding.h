#pragma once
// Integer helpers of the allocator model (sizes are positive).
#include <cstdint>

namespace oomguard::sim {

inline int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}
inline int64_t round_down(int64_t n, int64_t m) {
  return n / m * m;
}
inline int log2_floor(int64_t n) {
  return 63 - __builtin_clzll(static_cast<unsigned long long>(n));
}

}  // namespace oomguard::sim
