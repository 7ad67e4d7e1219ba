#pragma once
// The settings of PYTORCH_CUDA_ALLOC_CONF that change what the caching allocator reserves,
// as the simulator uses them (LibTorch 2.6+ semantics).
#include <array>
#include <cstdint>
#include <limits>
#include <string_view>

namespace oomguard::sim {

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kNoMaxSplit = std::numeric_limits<int64_t>::max();
// Power-of-two size intervals of roundup_power2_divisions: [<2 MiB], [2,4) MiB ... [>=32 GiB].
constexpr int kRoundupIntervals = 16;

struct AllocatorSettings {
  int64_t max_split_size = kNoMaxSplit;        // max_split_size_mb; blocks this big never split
  int64_t max_non_split_rounding = 20 * kMiB;  // slack an oversize block may carry on reuse
  std::array<int64_t, kRoundupIntervals> roundup_divisions{};  // 0: plain 512-byte rounding
  double garbage_collection_threshold = 0.0;  // 0: off; only acts under a memory limit
  bool expandable_segments = false;

  // Parses PYTORCH_CUDA_ALLOC_CONF text ("" gives the defaults). Options with no effect on
  // device memory (pinned_*, release_lock_on_cudamalloc, backend:native) are accepted and
  // ignored. Throws std::invalid_argument naming a bad option, and for backend:cudaMallocAsync,
  // which this model does not cover.
  static AllocatorSettings parse(std::string_view conf);
};

}  // namespace oomguard::sim
