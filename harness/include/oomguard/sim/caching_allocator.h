#pragma once
// CachingAllocator: a model of PyTorch's native CUDA caching allocator (LibTorch 1.13 to
// 2.6+, AllocatorSettings::torch_version; one device, one stream), reproducing its reserved
// memory, fragmentation and OOMs on a CPU.
// It follows harness/sim/cuda-caching-allocator.md sections 2-8: 512-byte rounding
// and roundup_power2_divisions, small (<= 1 MiB, 2 MiB segments) and large pools, best fit
// by (size, address), splitting and merging, max_split_size and oversize blocks, the
// release-and-retry ladder, memory limit and garbage collection, expandable segments. Left
// out: streams and events, CUDA graphs and memory pools, IPC, the cudaMallocAsync backend.
#include <cstdint>
#include <memory_resource>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <oomguard/sim/allocator_settings.h>

namespace oomguard::sim {

constexpr int64_t kMinBlockSize = 512;
constexpr int64_t kSmallSize = 1 * kMiB;       // largest block of the small pool
constexpr int64_t kSmallBuffer = 2 * kMiB;     // small-pool segment
constexpr int64_t kMinLargeAlloc = 10 * kMiB;  // below this a large request gets kLargeBuffer
constexpr int64_t kLargeBuffer = 20 * kMiB;
constexpr int64_t kRoundLarge = 2 * kMiB;  // segments for >= kMinLargeAlloc round to this

// One of c10's Stat counters: current and the highest current since the last reset.
struct Stat {
  int64_t current = 0, peak = 0;
  void add(int64_t n) {
    current += n;
    peak = current > peak ? current : peak;
  }
  void sub(int64_t n) { current -= n; }
};

// The aggregate figures of c10's DeviceStats that the model keeps.
struct AllocatorStats {
  Stat allocated_bytes;       // block sizes handed out (rounding and unsplit slack included)
  Stat reserved_bytes;        // segments (or mapped pages) taken from the driver
  Stat requested_bytes;       // what callers asked for
  Stat inactive_split_bytes;  // free space inside partly used segments: emptyCache keeps it
  int64_t segments = 0;
  int64_t num_alloc_retries = 0;  // the cache was flushed to retry a segment allocation
  int64_t num_ooms = 0;
};

// The card as the allocator sees it.
struct DeviceLimits {
  int64_t total_bytes = 0;        // the card's total ("GPU 0 has a total capacity of ...")
  int64_t driver_free_bytes = 0;  // what the driver can hand this process in all; 0: no end
  int64_t allowed_bytes = 0;      // memory fraction: most the process may reserve; 0 for none
  // A card of `capacity` that the process may fill: total, driver and fraction alike.
  static DeviceLimits capacity(int64_t capacity) { return {capacity, capacity, capacity}; }
  // A card of `total` bytes whose driver hands out `capacity`, with no memory fraction: a real
  // card (memory::CardProfile: its total less the CUDA context) or a bare capacity (both equal).
  static DeviceLimits card(int64_t total, int64_t capacity) { return {total, capacity, 0}; }
};

struct OomInfo {
  int64_t requested_bytes = 0;  // the caller's size
  int64_t alloc_bytes = 0;      // the segment it needed ("Tried to allocate")
  std::string message;          // as that LibTorch words it
  // The largest cached free block when it failed: below the request while reserved minus
  // allocated is above it, the free memory is there but in pieces (fragmentation).
  int64_t largest_free_bytes = 0;
};

// A segment taken from or given back to the driver (cudaMalloc / cudaFree).
struct SegmentEvent {
  bool alloc = true;  // false: released
  int64_t address = 0, size = 0;
};

// One segment as it is now, its blocks in address order.
struct SegmentState {
  int64_t address = 0, size = 0;
  bool small = false;
  struct BlockState {
    int64_t address = 0, size = 0, requested = 0;
    bool allocated = false;
  };
  std::vector<BlockState> blocks;
};

// A block live in a segment that the allocator held before the model started.
struct AdoptedBlock {
  int64_t address = 0, size = 0, requested = 0;
};

class CachingAllocator {
 public:
  using Handle = int32_t;
  static constexpr Handle kEmpty = -1;  // a 0-byte request: no block, as in LibTorch
  static constexpr Handle kOom = -2;

  CachingAllocator(const AllocatorSettings& settings, const DeviceLimits& device);

  // The block serving `bytes`, or kOom (last_oom() says why). Like LibTorch, a failed
  // request may first have released cached segments.
  Handle malloc(int64_t bytes);
  // Returns `block` to the cache (merged with free neighbours); nothing goes to the driver.
  void free(Handle block);
  // torch.cuda.empty_cache(): every unused segment (or page) goes back to the driver.
  void empty_cache();
  // A segment held before the model started (a PyTorch snapshot whose recording began
  // mid-run): `size` bytes at `address`, of the small or the large pool, with its live
  // blocks in address order, each inside it; the space between them is cached free memory.
  // Returns the live blocks' handles, in their order.
  std::vector<Handle> adopt_segment(
      int64_t address, int64_t size, bool small, const std::vector<AdoptedBlock>& live);
  // Peak := current for every Stat (resetPeakStats).
  void reset_peak();
  // setMemoryFraction: the most the process may reserve from now on, 0 for no limit. What is
  // reserved already stays.
  void set_allowed_bytes(int64_t bytes) { device_.allowed_bytes = bytes; }

  // Appends every segment taken or released from now on to `log` (nullptr: stop).
  void log_segments(std::vector<SegmentEvent>* log) { segment_log_ = log; }
  // The segments held now, by address (not with expandable segments: their pages are not
  // segments of their own).
  std::vector<SegmentState> segments() const;
  // Where `block` starts in the model's address space.
  int64_t block_address(Handle block) const { return at(block).ptr; }

  // memory_stats(): allocated, reserved, retries, OOMs, each with its peak.
  const AllocatorStats& stats() const { return stats_; }
  // Why the last failed malloc failed, as LibTorch would word it; empty before any.
  const std::optional<OomInfo>& last_oom() const { return last_oom_; }
  // The size of the block `block` (rounded; with unsplit slack).
  int64_t block_size(Handle block) const { return at(block).size; }
  // The largest cached free block: the biggest request served without the driver.
  int64_t largest_free_block() const;

  // The size the allocator rounds a request to, and the segment a cache miss reserves.
  int64_t round_size(int64_t bytes) const;
  static int64_t allocation_size(int64_t rounded);

 private:
  struct Block {
    int64_t ptr = 0, size = 0, requested = 0;
    int64_t gc_base = 0;  // the pool's get_free_block count when the block was freed
    Handle prev = kEmpty, next = kEmpty;
    bool small = false, allocated = false, mapped = true, expandable = false;
  };
  struct Key {
    int64_t size, ptr;
  };
  // Free blocks by (size, address): best fit is the first one not below {request, 0}.
  struct BySize {
    using is_transparent = void;
    const std::vector<Block>* blocks;
    Key key(Handle h) const;
    static bool less(Key a, Key b);
    bool operator()(Handle a, Handle b) const;
    bool operator()(Handle a, Key b) const;
    bool operator()(Key a, Handle b) const;
  };
  struct ByAddress {
    const std::vector<Block>* blocks;
    bool operator()(Handle a, Handle b) const;
  };
  struct Pool {
    Pool(const std::vector<Block>* blocks, bool small, std::pmr::memory_resource* memory);
    std::pmr::set<Handle, BySize> free;
    std::pmr::set<Handle, ByAddress> unmapped;  // expandable segments' unmapped ranges
    int64_t get_free_block_calls = 0;           // the garbage collector's clock
    bool small;
  };

  Block& at(Handle h) { return blocks_[static_cast<size_t>(h)]; }
  const Block& at(Handle h) const { return blocks_[static_cast<size_t>(h)]; }
  Handle new_block(const Block& b);
  void delete_block(Handle h);
  // Cuts `h` after `size` bytes: `h` keeps the low part, the new block returned (same pool and
  // flags, not in any set) the rest.
  Handle split(Handle h, int64_t size);
  Pool& pool_of(const Block& b) { return b.small ? small_ : large_; }
  bool is_split(const Block& b) const { return b.prev != kEmpty || b.next != kEmpty; }
  void insert_free(Handle h);
  Handle get_free_block(Pool& pool, int64_t size);
  Handle alloc_block(Pool& pool, int64_t size, int64_t alloc_size, bool is_retry);
  bool release_available_cached_blocks(Pool& pool, int64_t size);
  void release_cached_blocks();
  void release_blocks(Pool& pool);
  void release_block(Handle h);
  void garbage_collect();
  Handle alloc_found_block(Handle h, int64_t requested, int64_t size);
  bool should_split(const Block& b, int64_t size) const;
  bool gc_enabled() const;
  int64_t try_merge(Handle dst, Handle src);
  int64_t driver_free() const;
  // Expandable segments (section 7 of the reference).
  Handle try_allocate_expandable_block(Pool& pool, int64_t size);
  Handle find_expandable_block(Pool& pool, int64_t size);
  bool map_block(Handle h, int64_t size);
  void unmap_block(Handle h);
  void release_expandable_segment(Handle h);
  int64_t page_size(const Pool& pool) const { return pool.small ? kSmallBuffer : kLargeBuffer; }
  void fail(int64_t requested, int64_t alloc_size);

  AllocatorSettings settings_;
  DeviceLimits device_;
  std::vector<Block> blocks_;
  std::vector<Handle> unused_;  // indices of deleted blocks, for reuse
  std::pmr::unsynchronized_pool_resource node_memory_;
  Pool small_, large_;
  AllocatorStats stats_;
  std::optional<OomInfo> last_oom_;
  int64_t next_address_ = int64_t{1} << 40;
  std::vector<SegmentEvent>* segment_log_ = nullptr;
};

// LibTorch's format_size: "512 bytes", "1024.00 KiB", "20.00 MiB", "14.75 GiB".
std::string torch_format_size(int64_t bytes);

}  // namespace oomguard::sim
