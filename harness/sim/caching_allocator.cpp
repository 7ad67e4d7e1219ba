#include <oomguard/sim/caching_allocator.h>

#include <algorithm>
#include <iterator>
#include <limits>

#include "harness/sim/rounding.h"

namespace oomguard::sim {
namespace {

// roundup_power2_divisions: the next of `d` equal steps between two powers of two.
int64_t next_division(int64_t n, int64_t d) {
  if ((n & (n - 1)) == 0)
    return n;
  const int64_t floor2 = int64_t{1} << log2_floor(n);
  const int64_t step = floor2 >> log2_floor(d);
  return step == 0 ? floor2 << 1 : round_up(n, step);
}

}  // namespace

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
  if (segment_log_ != nullptr)
    segment_log_->push_back({/*alloc=*/true, b.ptr, alloc_size});
  stats_.reserved_bytes.add(alloc_size);
  ++stats_.segments;
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
// A segment from before the model started

std::vector<CachingAllocator::Handle> CachingAllocator::adopt_segment(
    int64_t address, int64_t size, bool small, const std::vector<AdoptedBlock>& live) {
  std::vector<Handle> handles, gaps;
  Handle prev = kEmpty;
  const auto append = [&](int64_t ptr, int64_t bytes) {
    Block b;
    b.ptr = ptr;
    b.size = bytes;
    b.small = small;
    b.prev = prev;
    const Handle h = new_block(b);
    if (prev != kEmpty)
      at(prev).next = h;
    prev = h;
    return h;
  };
  int64_t end = address;  // of what is laid out so far
  for (const AdoptedBlock& l : live) {
    if (l.address > end)
      gaps.push_back(append(end, l.address - end));
    const Handle h = append(l.address, l.size);
    at(h).allocated = true;
    at(h).requested = l.requested;
    stats_.allocated_bytes.add(l.size);
    stats_.requested_bytes.add(l.requested);
    handles.push_back(h);
    end = l.address + l.size;
  }
  if (end < address + size)
    gaps.push_back(append(end, address + size - end));
  for (Handle g : gaps) {
    insert_free(g);
    if (is_split(at(g)))
      stats_.inactive_split_bytes.add(at(g).size);
  }
  stats_.reserved_bytes.add(size);
  ++stats_.segments;
  next_address_ = std::max(next_address_, round_up(address + size, kRoundLarge));
  return handles;
}

// ---------------------------------------------------------------------------------------
// Figures

std::vector<SegmentState> CachingAllocator::segments() const {
  std::vector<bool> deleted(blocks_.size(), false);
  for (Handle h : unused_)
    deleted[static_cast<size_t>(h)] = true;
  std::vector<SegmentState> out;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    const Block& head = blocks_[i];
    if (deleted[i] || head.prev != kEmpty || head.expandable)
      continue;
    SegmentState s{head.ptr, 0, head.small, {}};
    for (Handle h = static_cast<Handle>(i); h != kEmpty; h = at(h).next) {
      const Block& b = at(h);
      s.blocks.push_back({b.ptr, b.size, b.allocated ? b.requested : 0, b.allocated});
      s.size += b.size;
    }
    out.push_back(s);
  }
  std::sort(out.begin(), out.end(), [](const SegmentState& a, const SegmentState& b) {
    return a.address < b.address;
  });
  return out;
}

void CachingAllocator::reset_peak() {
  for (Stat* s :
       {&stats_.allocated_bytes,
        &stats_.reserved_bytes,
        &stats_.requested_bytes,
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

}  // namespace oomguard::sim
