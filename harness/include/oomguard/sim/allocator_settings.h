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

// The LibTorch whose allocator is modelled, as major * 100 + minor (1.13 is 113, 2.6 is 206).
// What changed between versions: 1.13 and 2.0 round with one global division count (1.13
// leaves sizes unrounded at 1) and may bypass it above roundup_bypass_threshold_mb, and word
// the OOM message differently; expandable segments arrive in 2.1, max_non_split_rounding_mb
// in 2.6.
constexpr int kLatestModelled = 206;

struct AllocatorSettings {
  int torch_version = kLatestModelled;
  int64_t max_split_size = kNoMaxSplit;        // max_split_size_mb; blocks this big never split
  int64_t max_non_split_rounding = 20 * kMiB;  // slack an oversize block may carry on reuse
  std::array<int64_t, kRoundupIntervals> roundup_divisions{};  // 0: plain 512-byte rounding
  double garbage_collection_threshold = 0.0;  // 0: off; only acts under a memory limit
  bool expandable_segments = false;
  int64_t roundup_bypass_threshold = std::numeric_limits<int64_t>::max();  // 1.13 and 2.0
  bool cuda_malloc_async = false;  // backend:cudaMallocAsync, another allocator altogether

  // The settings the model replays: read_alloc_conf (<oomguard/sim/alloc_conf.h>) of
  // PYTORCH_CUDA_ALLOC_CONF text as LibTorch `torch_version` reads it; versions past the
  // latest modelled behave as it. Throws std::invalid_argument as read_alloc_conf does, and
  // for a version before 1.13 and backend:cudaMallocAsync, which are not modelled.
  static AllocatorSettings parse(std::string_view conf, int torch_version = kLatestModelled);
};

}  // namespace oomguard::sim
