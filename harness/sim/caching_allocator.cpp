#include "harness/sim/caching_allocator.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>

namespace oomguard::sim {
namespace {

int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}
int64_t round_down(int64_t n, int64_t m) {
  return n / m * m;
}
int log2_floor(int64_t n) {
  return 63 - __builtin_clzll(static_cast<unsigned long long>(n));
}

// roundup_power2_divisions: the next of `d` equal steps between two powers of two.
int64_t next_division(int64_t n, int64_t d) {
  if ((n & (n - 1)) == 0)
    return n;
  const int64_t floor2 = int64_t{1} << log2_floor(n);
  const int64_t step = floor2 >> log2_floor(d);
  return step == 0 ? floor2 << 1 : round_up(n, step);
}

}  // namespace

std::string torch_format_size(int64_t bytes) {
  char text[48];
  if (bytes <= 1024)
    std::snprintf(text, sizeof(text), "%lld bytes", static_cast<long long>(bytes));
  else if (bytes <= kMiB)
    std::snprintf(text, sizeof(text), "%.2f KiB", static_cast<double>(bytes) / 1024.0);
  else if (bytes <= 1024 * kMiB)
    std::snprintf(text, sizeof(text), "%.2f MiB", static_cast<double>(bytes) / double(kMiB));
  else
    std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / double(1024 * kMiB));
  return text;
}

// ---------------------------------------------------------------------------------------
// Block ordering

CachingAllocator::Key CachingAllocator::BySize::key(Handle h) const {
  const Block& b = (*blocks)[static_cast<size_t>(h)];
  return {b.size, b.ptr};
}
bool CachingAllocator::BySize::less(Key a, Key b) {
  return a.size != b.size ? a.size < b.size : a.ptr < b.ptr;
}
bool CachingAllocator::BySize::operator()(Handle a, Handle b) const {
  return less(key(a), key(b));
}
bool CachingAllocator::BySize::operator()(Handle a, Key b) const {
  return less(key(a), b);
}
bool CachingAllocator::BySize::operator()(Key a, Handle b) const {
  return less(a, key(b));
}
bool CachingAllocator::ByAddress::operator()(Handle a, Handle b) const {
  return (*blocks)[static_cast<size_t>(a)].ptr < (*blocks)[static_cast<size_t>(b)].ptr;
}

CachingAllocator::Pool::Pool(
    const std::vector<Block>* blocks, bool small_pool, std::pmr::memory_resource* memory)
    : free(BySize{blocks}, memory), unmapped(ByAddress{blocks}, memory), small(small_pool) {}

CachingAllocator::CachingAllocator(const AllocatorSettings& settings, const DeviceLimits& device)
    : settings_(settings),
      device_(device),
      small_(&blocks_, /*small_pool=*/true, &node_memory_),
      large_(&blocks_, /*small_pool=*/false, &node_memory_) {}

CachingAllocator::Handle CachingAllocator::new_block(const Block& b) {
  if (!unused_.empty()) {
    const Handle h = unused_.back();
    unused_.pop_back();
    at(h) = b;
    return h;
  }
  blocks_.push_back(b);
  return static_cast<Handle>(blocks_.size() - 1);
}

void CachingAllocator::delete_block(Handle h) {
  unused_.push_back(h);
}

CachingAllocator::Handle CachingAllocator::split(Handle h, int64_t size) {
  Block rest = at(h);
  rest.ptr += size;
  rest.size -= size;
  rest.prev = h;
  const Handle r = new_block(rest);  // may move blocks_: no references across it
  Block& b = at(h);
  if (b.next != kEmpty)
    at(b.next).prev = r;
  b.next = r;
  b.size = size;
  return r;
}

void CachingAllocator::insert_free(Handle h) {
  Block& b = at(h);
  Pool& pool = pool_of(b);
  b.gc_base = pool.get_free_block_calls;
  pool.free.insert(h);
}

// ---------------------------------------------------------------------------------------
// Sizes

int64_t CachingAllocator::round_size(int64_t bytes) const {
  if (bytes < kMinBlockSize)
    return kMinBlockSize;
  if (settings_.torch_version < 201) {
    // One division count for every size (the table holds it everywhere); it applies from 1.
    const int64_t d = settings_.roundup_divisions[0];
    if (bytes > settings_.roundup_bypass_threshold || d <= 0 || bytes <= kMinBlockSize * d)
      return round_up(bytes, kMinBlockSize);
    if (settings_.torch_version < 200 && d <= 1)
      return bytes;  // 1.13's helper returns the size as it is: not even a multiple of 512
    return next_division(bytes, d);
  }
  const int index = std::clamp(log2_floor(bytes) - 20, 0, kRoundupIntervals - 1);
  const int64_t d = settings_.roundup_divisions[static_cast<size_t>(index)];
  if (d > 1 && bytes > kMinBlockSize * d)
    return next_division(bytes, d);
  return round_up(bytes, kMinBlockSize);
}

int64_t CachingAllocator::allocation_size(int64_t rounded) {
  if (rounded <= kSmallSize)
    return kSmallBuffer;
  if (rounded < kMinLargeAlloc)
    return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

bool CachingAllocator::should_split(const Block& b, int64_t size) const {
  const int64_t remaining = b.size - size;
  if (b.small || settings_.expandable_segments)
    return remaining >= kMinBlockSize;
  return size < settings_.max_split_size && remaining > kSmallSize;
}

bool CachingAllocator::gc_enabled() const {
  return device_.allowed_bytes > 0 && settings_.garbage_collection_threshold > 0.0;
}

int64_t CachingAllocator::driver_free() const {
  if (device_.driver_free_bytes <= 0)
    return std::numeric_limits<int64_t>::max();
  return device_.driver_free_bytes - stats_.reserved_bytes.current;
}

// ---------------------------------------------------------------------------------------
// malloc: best fit, then a new segment, then the release-and-retry ladder, then OOM.

CachingAllocator::Handle CachingAllocator::malloc(int64_t bytes) {
  if (bytes == 0)
    return kEmpty;
  if (bytes >= (int64_t{1} << 60)) {
    last_oom_ =
        OomInfo{bytes, bytes, "CUDA out of memory. Tried to allocate more than 1EB memory."};
    return kOom;
  }
  const int64_t size = round_size(bytes);
  Pool& pool = size <= kSmallSize ? small_ : large_;
  const int64_t alloc_size = allocation_size(size);
  Handle h = get_free_block(pool, size);
  if (h == kOom) {
    if (gc_enabled())
      garbage_collect();
    h = alloc_block(pool, size, alloc_size, /*is_retry=*/false);
    if (h == kOom && release_available_cached_blocks(pool, size))
      h = alloc_block(pool, size, alloc_size, /*is_retry=*/false);
    if (h == kOom) {
      release_cached_blocks();
      h = alloc_block(pool, size, alloc_size, /*is_retry=*/true);
    }
  }
  if (h == kOom) {
    fail(bytes, alloc_size);
    return kOom;
  }
  return alloc_found_block(h, bytes, size);
}

CachingAllocator::Handle CachingAllocator::get_free_block(Pool& pool, int64_t size) {
  if (gc_enabled())
    ++pool.get_free_block_calls;
  auto it = pool.free.lower_bound(Key{size, 0});
  if (it == pool.free.end())
    return kOom;
  if (at(*it).expandable) {
    // The size a block could grow to by mapping the unmapped range after it: the tail of
    // a segment loses to an interior block that fits as it is.
    const auto expandable_size = [this](Handle b) {
      const Block& block = at(b);
      const bool grows = block.next != kEmpty && !at(block.next).mapped;
      return block.size + (grows ? at(block.next).size : 0);
    };
    for (auto next = std::next(it); at(*it).expandable && next != pool.free.end() &&
                                    expandable_size(*next) < expandable_size(*it);) {
      it = next++;
    }
  }
  const Block& b = at(*it);
  // Oversize blocks serve only oversize requests, and those only within the rounding slack.
  if (size < settings_.max_split_size && b.size >= settings_.max_split_size)
    return kOom;
  if (size >= settings_.max_split_size && b.size >= size + settings_.max_non_split_rounding)
    return kOom;
  const Handle found = *it;
  pool.free.erase(it);
  return found;
}

CachingAllocator::Handle CachingAllocator::alloc_block(
    Pool& pool, int64_t size, int64_t alloc_size, bool is_retry) {
  if (is_retry)
    ++stats_.num_alloc_retries;
  if (device_.allowed_bytes > 0 &&
      stats_.reserved_bytes.current + alloc_size > device_.allowed_bytes)
    return kOom;
  if (settings_.expandable_segments)
    return try_allocate_expandable_block(pool, size);
  if (alloc_size > driver_free())
    return kOom;
  Block b;
  b.ptr = next_address_;
  b.size = alloc_size;
  b.small = pool.small;
  next_address_ += round_up(alloc_size, kRoundLarge);
  stats_.reserved_bytes.add(alloc_size);
  ++stats_.segments;
  ++stats_.num_device_alloc;
  return new_block(b);
}

CachingAllocator::Handle CachingAllocator::alloc_found_block(
    Handle h, int64_t requested, int64_t size) {
  const bool already_split = is_split(at(h));
  const bool expandable = at(h).expandable;
  if (should_split(at(h), size)) {
    // The request takes the low addresses; the rest stays free.
    const Handle rest = split(h, size);
    insert_free(rest);
    if (!expandable) {
      if (already_split)
        stats_.inactive_split_bytes.sub(size);
      else
        stats_.inactive_split_bytes.add(at(rest).size);
    }
  } else if (already_split && !expandable) {
    stats_.inactive_split_bytes.sub(at(h).size);
  }
  Block& b = at(h);
  b.allocated = true;
  b.requested = requested;
  stats_.allocated_bytes.add(b.size);
  stats_.active_bytes.add(b.size);
  stats_.requested_bytes.add(requested);
  return h;
}

// ---------------------------------------------------------------------------------------
// free: merge with free neighbours and cache; nothing goes back to the driver.

void CachingAllocator::free(Handle h) {
  if (h < 0)
    return;
  Block& b = at(h);
  b.allocated = false;
  const int64_t size = b.size, requested = b.requested;
  const Handle prev = b.prev, next = b.next;
  stats_.allocated_bytes.sub(size);
  int64_t net_inactive_split = -try_merge(h, prev) - try_merge(h, next);
  insert_free(h);
  const Block& merged = at(h);
  if (is_split(merged))
    net_inactive_split += merged.size;
  if (!merged.expandable) {
    if (net_inactive_split > 0)
      stats_.inactive_split_bytes.add(net_inactive_split);
    else
      stats_.inactive_split_bytes.sub(-net_inactive_split);
  }
  stats_.active_bytes.sub(size);
  stats_.requested_bytes.sub(requested);
}

int64_t CachingAllocator::try_merge(Handle dst, Handle src) {
  if (src == kEmpty)
    return 0;
  Block& s = at(src);
  Block& d = at(dst);
  if (s.allocated || s.mapped != d.mapped)
    return 0;
  Pool& pool = pool_of(s);
  if (s.mapped)
    pool.free.erase(src);
  else
    pool.unmapped.erase(src);
  if (d.prev == src) {
    d.ptr = s.ptr;
    d.prev = s.prev;
    if (d.prev != kEmpty)
      at(d.prev).next = dst;
  } else {
    d.next = s.next;
    if (d.next != kEmpty)
      at(d.next).prev = dst;
  }
  const int64_t subsumed = s.size;
  d.size += subsumed;
  delete_block(src);
  return subsumed;
}

// ---------------------------------------------------------------------------------------
// Giving memory back: oversize blocks, whole cached segments, garbage collection.

void CachingAllocator::release_block(Handle h) {
  const Block& b = at(h);
  pool_of(b).free.erase(h);
  stats_.reserved_bytes.sub(b.size);
  --stats_.segments;
  ++stats_.num_device_free;
  delete_block(h);
}

bool CachingAllocator::release_available_cached_blocks(Pool& pool, int64_t size) {
  const int64_t max_split = settings_.max_split_size;
  if (max_split == kNoMaxSplit)
    return false;
  const int64_t key = std::max(size, max_split);
  auto it = pool.free.lower_bound(Key{key, 0});
  if (it != pool.free.end() && !at(*it).expandable) {
    release_block(*it);
    return true;
  }
  // No single block is large enough: release oversize blocks from the largest down.
  if (it == pool.free.begin())
    return false;
  --it;
  int64_t released = 0;
  while (released < key && at(*it).size >= max_split) {
    const Handle current = *it;
    const bool first = it == pool.free.begin();
    if (!first)
      --it;
    if (!at(current).expandable) {
      released += at(current).size;
      release_block(current);
    }
    if (first)
      break;
  }
  return released >= key;
}

void CachingAllocator::release_cached_blocks() {
  release_blocks(large_);
  release_blocks(small_);
}

void CachingAllocator::release_blocks(Pool& pool) {
  std::vector<Handle> to_unmap;
  for (auto it = pool.free.begin(); it != pool.free.end();) {
    const Handle h = *it++;
    const Block& b = at(h);
    if (b.expandable)
      to_unmap.push_back(h);
    else if (!is_split(b))
      release_block(h);
  }
  for (const Handle h : to_unmap) {
    unmap_block(h);
    const Block& b = at(h);
    if (!b.mapped && !is_split(b))
      release_expandable_segment(h);
  }
}

void CachingAllocator::empty_cache() {
  release_cached_blocks();
}

void CachingAllocator::garbage_collect() {
  const auto threshold = static_cast<int64_t>(
      settings_.garbage_collection_threshold * static_cast<double>(device_.allowed_bytes));
  if (stats_.reserved_bytes.current <= threshold)
    return;
  const int64_t target = stats_.reserved_bytes.current - threshold;
  // A block's age: get_free_block calls on the large pool since it was cached.
  const auto age = [this](Handle h) { return large_.get_free_block_calls - at(h).gc_base; };
  int64_t total_age = 0, count = 0;
  for (const Handle h : large_.free) {
    if (!is_split(at(h))) {
      total_age += age(h);
      ++count;
    }
  }
  int64_t reclaimed = 0;
  bool freed = true;
  while (reclaimed < target && freed && count > 0) {
    // Every whole segment at least as old as the average goes; the sweep never stops halfway.
    const double average_age = static_cast<double>(total_age) / static_cast<double>(count);
    freed = false;
    for (auto it = large_.free.begin(); it != large_.free.end();) {
      const Handle h = *it++;
      const Block& b = at(h);
      if (!is_split(b) && !b.expandable && static_cast<double>(age(h)) >= average_age) {
        freed = true;
        reclaimed += b.size;
        total_age -= age(h);
        --count;
        release_block(h);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Expandable segments: one virtual range per pool, mapped in pages of 2 MiB (small pool)
// or 20 MiB (large pool) as it grows, unmapped page by page when the cache is released.

CachingAllocator::Handle CachingAllocator::try_allocate_expandable_block(Pool& pool, int64_t size) {
  Handle c = find_expandable_block(pool, size);
  if (!at(c).mapped && !map_block(c, std::min(at(c).size, size)))
    return kOom;
  // Map the unmapped range after the candidate until it is large enough; each mapping
  // merges the candidate into the newly mapped block.
  while (at(c).size < size) {
    const Handle next = at(c).next;
    if (next == kEmpty)
      return kOom;  // larger than a whole segment's address space
    const int64_t missing = size - at(c).size;
    if (!map_block(next, std::min(missing, at(next).size)))
      return kOom;
    c = next;
  }
  pool.free.erase(c);
  return c;
}

CachingAllocator::Handle CachingAllocator::find_expandable_block(Pool& pool, int64_t size) {
  const auto allocatable = [this](Handle h) { return h != kEmpty && !at(h).allocated; };
  // The lowest address where free and unmapped blocks together hold `size`.
  for (const Handle u : pool.unmapped) {
    Handle start = allocatable(at(u).prev) ? at(u).prev : u;
    int64_t bytes = 0;
    for (Handle b = start; bytes < size && allocatable(b); b = at(b).next)
      bytes += at(b).size;
    if (bytes >= size)
      return start;
  }
  // A new segment: address space for 1.125 times the card, nothing mapped yet.
  const int64_t page = page_size(pool);
  const int64_t card = device_.total_bytes > 0 ? device_.total_bytes : int64_t{1} << 40;
  Block b;
  b.ptr = round_up(next_address_, page);
  b.size = round_up(card + card / 8, page);
  b.small = pool.small;
  b.mapped = false;
  b.expandable = true;
  next_address_ = b.ptr + b.size;
  const Handle h = new_block(b);
  pool.unmapped.insert(h);
  return h;
}

bool CachingAllocator::map_block(Handle h, int64_t size) {
  Pool& pool = pool_of(at(h));
  const int64_t mapped = std::min(round_up(size, page_size(pool)), at(h).size);
  if (mapped > driver_free())
    return false;  // the pages of one mapping are created all or none
  pool.unmapped.erase(h);
  at(h).mapped = true;
  if (mapped < at(h).size) {
    const Handle rest = split(h, mapped);
    at(rest).mapped = false;
    pool.unmapped.insert(rest);
  }
  try_merge(h, at(h).prev);
  try_merge(h, at(h).next);
  insert_free(h);
  stats_.reserved_bytes.add(mapped);
  ++stats_.num_device_alloc;
  return true;
}

void CachingAllocator::unmap_block(Handle h) {
  Pool& pool = pool_of(at(h));
  const int64_t page = page_size(pool);
  const Block whole = at(h);
  // Only pages entirely inside the free block: a page shared with a live block stays.
  const int64_t begin = round_up(whole.ptr, page), end = round_down(whole.ptr + whole.size, page);
  if (end <= begin)
    return;
  pool.free.erase(h);
  if (begin > whole.ptr) {
    Block before = whole;
    before.size = begin - whole.ptr;
    before.next = h;
    const Handle f = new_block(before);
    if (before.prev != kEmpty)
      at(before.prev).next = f;
    at(h).prev = f;
    insert_free(f);
  }
  if (end < whole.ptr + whole.size)
    insert_free(split(h, end - whole.ptr));
  Block& b = at(h);
  b.ptr = begin;
  b.size = end - begin;
  b.mapped = false;
  try_merge(h, b.prev);
  try_merge(h, at(h).next);
  pool.unmapped.insert(h);
  stats_.reserved_bytes.sub(end - begin);
  ++stats_.num_device_free;
}

void CachingAllocator::release_expandable_segment(Handle h) {
  pool_of(at(h)).unmapped.erase(h);
  delete_block(h);
}

// ---------------------------------------------------------------------------------------
// Figures and the OOM message

void CachingAllocator::reset_peak() {
  for (Stat* s :
       {&stats_.allocated_bytes,
        &stats_.reserved_bytes,
        &stats_.requested_bytes,
        &stats_.active_bytes,
        &stats_.inactive_split_bytes})
    s->peak = s->current;
}

int64_t CachingAllocator::largest_free_block() const {
  int64_t largest = 0;
  for (const Pool* pool : {&small_, &large_})
    if (!pool->free.empty())
      largest = std::max(largest, at(*pool->free.rbegin()).size);
  return largest;
}

void CachingAllocator::fail(int64_t requested, int64_t alloc_size) {
  ++stats_.num_ooms;
  const int64_t allocated = stats_.allocated_bytes.current;
  const int64_t reserved = stats_.reserved_bytes.current;
  const int64_t total = device_.total_bytes;
  const std::string free = torch_format_size(std::min(driver_free(), total));
  if (settings_.torch_version < 201) {  // 1.13 and 2.0: one parenthesised sentence
    std::string message = "CUDA out of memory. Tried to allocate " + torch_format_size(alloc_size) +
                          " (GPU 0; " + torch_format_size(total) + " total capacity; " +
                          torch_format_size(allocated) + " already allocated; " + free + " free; ";
    if (device_.allowed_bytes > 0)
      message += torch_format_size(device_.allowed_bytes) + " allowed; ";
    message += torch_format_size(reserved) +
               " reserved in total by PyTorch) If reserved memory is >> allocated memory try "
               "setting max_split_size_mb to avoid fragmentation.  See documentation for Memory "
               "Management and PYTORCH_CUDA_ALLOC_CONF";
    last_oom_ = OomInfo{requested, alloc_size, std::move(message), largest_free_block()};
    return;
  }
  std::string message = "CUDA out of memory. Tried to allocate " + torch_format_size(alloc_size) +
                        ". GPU 0 has a total capacity of " + torch_format_size(total) +
                        " of which " + free + " is free. ";
  if (device_.allowed_bytes > 0)
    message += torch_format_size(device_.allowed_bytes) + " allowed; ";
  message += "Of the allocated memory " + torch_format_size(allocated) +
             " is allocated by PyTorch, and " + torch_format_size(reserved - allocated) +
             " is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
             "large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
             "fragmentation.  See documentation for Memory Management  "
             "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)";
  last_oom_ = OomInfo{requested, alloc_size, std::move(message), largest_free_block()};
}

}  // namespace oomguard::sim
