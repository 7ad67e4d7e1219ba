// CachingAllocator, giving memory back (reference sections 3 and 8.2): oversize blocks, every
// whole cached segment (the retry ladder and emptyCache), garbage collection.
#include <algorithm>
#include <vector>

#include <oomguard/sim/caching_allocator.h>

namespace oomguard::sim {

void CachingAllocator::release_block(Handle h) {
  const Block& b = at(h);
  pool_of(b).free.erase(h);
  if (segment_log_ != nullptr)
    segment_log_->push_back({/*alloc=*/false, b.ptr, b.size});
  stats_.reserved_bytes.sub(b.size);
  --stats_.segments;
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

}  // namespace oomguard::sim
