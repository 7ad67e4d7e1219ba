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

  // Parses PYTORCH_CUDA_ALLOC_CONF text ("" gives the defaults) as LibTorch `torch_version`
  // reads it; versions past the latest modelled behave as it. Options with no effect on
  // device memory (pinned_*, release_lock_on_cudamalloc, backend:native) are accepted and
  // ignored. Throws std::invalid_argument naming a bad option or one that version does not
  // know, for a version before 1.13, and for backend:cudaMallocAsync, which is not modelled.
  static AllocatorSettings parse(std::string_view conf, int torch_version = kLatestModelled);
};

}  // namespace oomguard::sim
