// CachingAllocator, expandable segments (reference section 7): one virtual range per pool,
// mapped in pages of 2 MiB (small pool) or 20 MiB (large pool) as it grows, unmapped page by
// page when the cache is released.
#include <algorithm>

#include <oomguard/sim/caching_allocator.h>
#include "harness/sim/rounding.h"

namespace oomguard::sim {

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
}

void CachingAllocator::release_expandable_segment(Handle h) {
  pool_of(at(h)).unmapped.erase(h);
  delete_block(h);
}

}  // namespace oomguard::sim
