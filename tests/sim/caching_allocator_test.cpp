// The caching-allocator model against outcomes worked out by hand from the allocator's rules
// (harness/sim/cuda-caching-allocator.md; sizes in MiB unless said otherwise).
#include <sstream>

#include <gtest/gtest.h>

#include <oomguard/sim/caching_allocator.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/trace.h>
#include "tests/sim/trace_builder.h"

namespace oomguard::sim {
namespace {

constexpr int64_t MiB = kMiB;

ReplayResult replay_with(const TraceBuilder& t, const char* conf, const DeviceLimits& device = {}) {
  return replay(t.build(), AllocatorSettings::parse(conf), device);
}

TEST(CachingAllocatorTest, SmallRequestsRoundTo512AndShareTwoMiBSegments) {
  // 1 byte rounds to 512 and takes a 2 MiB small-pool segment, split: allocated 512,
  // reserved 2 MiB. Three 600 KiB requests (multiples of 512) fit in the rest of it
  // (512 + 3 * 600 KiB = 1800.5 KiB <= 2 MiB); a fourth takes a second segment: 4 MiB.
  TraceBuilder t;
  t.alloc(1);
  for (int i = 0; i < 4; ++i)
    t.alloc(600 * 1024);
  const ReplayResult r = replay_with(t, "");
  EXPECT_EQ(r.peak_requested_bytes, 1 + 4 * 600 * 1024);
  EXPECT_EQ(r.peak_allocated_bytes, 512 + 4 * 600 * 1024);
  EXPECT_EQ(r.peak_reserved_bytes, 4 * MiB);

  // Freed, the 512-byte block merges back: nothing allocated, the segment stays cached.
  CachingAllocator a({}, {});
  const auto h = a.malloc(1);
  EXPECT_EQ(a.block_size(h), 512);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 2 * MiB - 512);
  a.free(h);
  EXPECT_EQ(a.stats().allocated_bytes.current, 0);
  EXPECT_EQ(a.stats().reserved_bytes.current, 2 * MiB);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 0);
}

TEST(CachingAllocatorTest, ThreeMiBRequestReservesATwentyMiBSegment) {
  // 1 MiB < 3 MiB < 10 MiB: a 20 MiB segment, split (17 MiB left > 1 MiB). A second 3 MiB
  // request is served from the remainder: still one segment.
  TraceBuilder t;
  t.alloc(3 * MiB);
  t.alloc(3 * MiB);
  const ReplayResult r = replay_with(t, "");
  EXPECT_EQ(r.peak_allocated_bytes, 6 * MiB);
  EXPECT_EQ(r.peak_reserved_bytes, 20 * MiB);
  EXPECT_FALSE(r.oom.has_value());

  // On a 10 MiB card it cannot: the message names the segment, not the request.
  const ReplayResult small = replay_with(t, "", DeviceLimits::capacity(10 * MiB));
  ASSERT_TRUE(small.oom.has_value());
  EXPECT_EQ(small.oom->info.alloc_bytes, 20 * MiB);
  EXPECT_NE(small.oom->info.message.find("Tried to allocate 20.00 MiB"), std::string::npos)
      << small.oom->info.message;
}

TEST(CachingAllocatorTest, UnsplitLargeBlockCountsWhole) {
  // 11.5 MiB >= 10 MiB: a 12 MiB segment; the 0.5 MiB left is not > 1 MiB, so the block is
  // not split and allocated counts all 12 MiB. 12 MiB + 1 rounds to 12 MiB + 512, takes a
  // 14 MiB segment and splits (2 MiB - 512 left > 1 MiB).
  CachingAllocator a({}, {});
  a.malloc(11 * MiB + MiB / 2);
  EXPECT_EQ(a.stats().allocated_bytes.current, 12 * MiB);
  EXPECT_EQ(a.stats().requested_bytes.current, 11 * MiB + MiB / 2);
  a.malloc(12 * MiB + 1);
  EXPECT_EQ(a.stats().allocated_bytes.current, 24 * MiB + 512);
  EXPECT_EQ(a.stats().reserved_bytes.current, 26 * MiB);
}

// Three 28.5 MiB activations, each followed by a 1.2 MiB tensor that lives on, then the
// activations are freed and a 60 MiB request comes, on a 120 MiB card.
TraceBuilder fragmenting_trace() {
  TraceBuilder t;
  std::vector<int64_t> activations;
  for (int i = 0; i < 3; ++i) {
    t.step(i);
    activations.push_back(t.alloc(28 * MiB + MiB / 2, "activation"));
    t.alloc(MiB + MiB / 5, "kept");
  }
  for (const int64_t id : activations)
    t.free(id);
  t.step(3);
  t.alloc(60 * MiB, "big");
  return t;
}

TEST(CachingAllocatorTest, FragmentationFailsByDefault) {
  // Default: 28.5 MiB takes a 30 MiB segment, split (1.5 MiB left > 1 MiB); the 1.2 MiB
  // tensor best-fits that 1.5 MiB remainder. Each segment is pinned by a live 1.5 MiB block,
  // so after the frees 85.5 MiB is cached yet no segment is whole: 90 + 60 > 120, nothing to
  // release, the retry fails too: OOM with 4.5 MiB allocated and 90 MiB reserved.
  const ReplayResult r = replay_with(fragmenting_trace(), "", DeviceLimits::capacity(120 * MiB));
  ASSERT_TRUE(r.oom.has_value());
  EXPECT_EQ(r.oom->tag, "big");
  EXPECT_EQ(r.oom->step, 3);
  EXPECT_EQ(r.num_alloc_retries, 1);
  EXPECT_EQ(r.num_ooms, 1);
  EXPECT_NE(
      r.oom->info.message.find("Of the allocated memory 4.50 MiB is allocated by PyTorch, and "
                               "85.50 MiB is reserved by PyTorch but unallocated"),
      std::string::npos)
      << r.oom->info.message;
  EXPECT_NE(r.oom->info.message.find("120.00 MiB allowed;"), std::string::npos);
  // The 85.5 MiB is in three 28.5 MiB pieces, none of them 60 MiB.
  EXPECT_EQ(r.oom->info.largest_free_bytes, 28 * MiB + MiB / 2);
}

TEST(CachingAllocatorTest, FragmentationFixedByMaxSplitSize) {
  // max_split_size_mb:25: 28.5 MiB is oversize, never split, so the 1.2 MiB tensors share
  // one 20 MiB segment of their own (reserved 3 * 30 + 20 = 110). The 60 MiB request: 110 +
  // 60 > 120, so oversize blocks are released from the largest down until 60 MiB is freed
  // (two 30 MiB segments), and 50 + 60 <= 120 fits without a full cache flush.
  const ReplayResult r =
      replay_with(fragmenting_trace(), "max_split_size_mb:25", DeviceLimits::capacity(120 * MiB));
  EXPECT_FALSE(r.oom.has_value()) << r.oom->info.message;
  EXPECT_EQ(r.num_alloc_retries, 0);
  EXPECT_EQ(r.peak_reserved_bytes, 110 * MiB);
}

TEST(CachingAllocatorTest, FragmentationFixedByExpandableSegments) {
  // expandable_segments:True: one growing segment, mapped in 20 MiB pages, every block
  // split: the activations and kept tensors are packed end to end (0-28.5 activation,
  // 28.5-29.7 kept, ...), 100 MiB mapped. After the frees, 60 MiB more would pass 120, so
  // the cache flush unmaps the whole pages inside the holes: 0-20 and 60-80 (the middle
  // hole, 29.7-58.2, holds no whole page): 60 MiB reserved. The retry maps three pages
  // after the 10.9 MiB free tail: reserved 120, one retry, no OOM.
  const ReplayResult r = replay_with(
      fragmenting_trace(), "expandable_segments:True", DeviceLimits::capacity(120 * MiB));
  EXPECT_FALSE(r.oom.has_value()) << r.oom->info.message;
  EXPECT_EQ(r.num_alloc_retries, 1);
  EXPECT_EQ(r.peak_reserved_bytes, 120 * MiB);
}

TEST(CachingAllocatorTest, ExpandableSegmentsMapWholePages) {
  // 50 MiB on a fresh large pool maps three 20 MiB pages; the segment count stays 0.
  CachingAllocator a(AllocatorSettings::parse("expandable_segments:True"), {});
  a.malloc(50 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.current, 60 * MiB);
  EXPECT_EQ(a.stats().segments, 0);
  EXPECT_EQ(a.stats().allocated_bytes.current, 50 * MiB);
}

TEST(CachingAllocatorTest, RetryLadderFreesCachedSegmentsBeforeAnOom) {
  // Card of 60 MiB. A 30 MiB block is freed and stays cached; a 40 MiB request misses the
  // cache, 30 + 40 > 60, so the whole cached segment is released and the retry (counted)
  // reserves 40. A 30 MiB request then finds nothing to release: second retry, OOM.
  TraceBuilder t;
  t.free(t.alloc(30 * MiB));
  t.alloc(40 * MiB);
  t.alloc(30 * MiB, "last");
  const ReplayResult r = replay_with(t, "", DeviceLimits::capacity(60 * MiB));
  EXPECT_EQ(r.num_alloc_retries, 2);
  EXPECT_EQ(r.num_ooms, 1);
  ASSERT_TRUE(r.oom.has_value());
  EXPECT_EQ(r.oom->tag, "last");
  EXPECT_EQ(r.peak_reserved_bytes, 40 * MiB);
  EXPECT_NE(r.oom->info.message.find("Tried to allocate 30.00 MiB"), std::string::npos);
}

TEST(CachingAllocatorTest, MemoryFractionAllowsEqualityAndRefusesOneSegmentMore) {
  // 40 MiB allowed: two unsplit 20 MiB segments make exactly 40 (allowed); one more byte
  // needs a 2 MiB small segment: 42 > 40 and nothing is cached, so OOM.
  TraceBuilder t;
  t.alloc(20 * MiB);
  t.alloc(20 * MiB);
  const ReplayResult fits = replay_with(t, "", DeviceLimits::capacity(40 * MiB));
  EXPECT_FALSE(fits.oom.has_value());
  EXPECT_EQ(fits.peak_reserved_bytes, 40 * MiB);
  t.alloc(1);
  const ReplayResult r = replay_with(t, "", DeviceLimits::capacity(40 * MiB));
  ASSERT_TRUE(r.oom.has_value());
  EXPECT_NE(
      r.oom->info.message.find("Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
                               "40.00 MiB of which 0 bytes is free. 40.00 MiB allowed;"),
      std::string::npos)
      << r.oom->info.message;
}

TEST(CachingAllocatorTest, OversizeBlocksServeOnlyNearSizes) {
  // max_split_size_mb:128. A cached 200 MiB block is not handed to a 100 MiB request (it is
  // oversize, the request is not), nor to a 150 MiB one (200 >= 150 + 20 MiB slack): both
  // take new segments. A 190 MiB request may take it (200 < 190 + 20): counted whole.
  CachingAllocator a(AllocatorSettings::parse("max_split_size_mb:128"), {});
  a.free(a.malloc(200 * MiB));
  a.malloc(100 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.current, 300 * MiB);
  a.malloc(150 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.current, 450 * MiB);
  a.malloc(190 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.current, 450 * MiB);
  EXPECT_EQ(a.stats().allocated_bytes.current, 450 * MiB);
}

TEST(CachingAllocatorTest, RoundupPowerTwoDivisions) {
  // d = 4 between 512 MiB and 1 GiB gives steps of 128 MiB: 600 MiB rounds to 640 MiB. For
  // 1200 bytes, 1200 <= 512 * 4, so plain 512-byte rounding: 1536.
  const CachingAllocator a(AllocatorSettings::parse("roundup_power2_divisions:4"), {});
  EXPECT_EQ(a.round_size(600 * MiB), 640 * MiB);
  EXPECT_EQ(a.round_size(1200), 1536);
  EXPECT_EQ(a.round_size(512 * MiB), 512 * MiB);
  // [256:1,512:2,1024:4,>:8]: sizes below 512 MiB get 1 (off), [512 MiB, 1 GiB) gets 2,
  // from 1 GiB on ">" overwrites 4 with 8.
  const AllocatorSettings s =
      AllocatorSettings::parse("roundup_power2_divisions:[256:1,512:2,1024:4,>:8]");
  EXPECT_EQ(s.roundup_divisions[0], 1);
  EXPECT_EQ(s.roundup_divisions[8], 1);
  EXPECT_EQ(s.roundup_divisions[9], 2);
  EXPECT_EQ(s.roundup_divisions[10], 8);
  EXPECT_EQ(s.roundup_divisions[15], 8);
  const CachingAllocator b(s, {});
  EXPECT_EQ(b.round_size(600 * MiB), 768 * MiB);
  EXPECT_EQ(b.round_size(300 * MiB), 300 * MiB);
}

TEST(CachingAllocatorTest, LibTorch113RoundsWithOneDivisionCount) {
  // 1.13 and 2.0: one count for every size. 1.13's helper returns the size untouched at
  // d = 1 (not even a multiple of 512); from 2.1 d = 1 means plain rounding.
  EXPECT_EQ(
      CachingAllocator(AllocatorSettings::parse("roundup_power2_divisions:1", 113), {})
          .round_size(1000),
      1000);
  EXPECT_EQ(
      CachingAllocator(AllocatorSettings::parse("roundup_power2_divisions:1", 206), {})
          .round_size(1000),
      1024);
  // d = 4 rounds 600 MiB to 640 MiB, unless the size is above roundup_bypass_threshold_mb.
  EXPECT_EQ(
      CachingAllocator(AllocatorSettings::parse("roundup_power2_divisions:4", 113), {})
          .round_size(600 * MiB),
      640 * MiB);
  const auto bypass =
      AllocatorSettings::parse("roundup_power2_divisions:4,roundup_bypass_threshold_mb:512", 113);
  EXPECT_EQ(CachingAllocator(bypass, {}).round_size(600 * MiB), 600 * MiB);
  // What 1.13 does not know is refused, as LibTorch 1.13 would refuse it.
  EXPECT_THROW(
      AllocatorSettings::parse("roundup_power2_divisions:[256:1]", 113), std::invalid_argument);
  EXPECT_THROW(AllocatorSettings::parse("expandable_segments:True", 113), std::invalid_argument);
  EXPECT_NO_THROW(AllocatorSettings::parse("expandable_segments:True", 201));
}

TEST(CachingAllocatorTest, LibTorch113WordsTheOomInOneSentence) {
  // The 3 MiB request on a 10 MiB card, as 1.13 and 2.0 print it.
  TraceBuilder t;
  t.alloc(3 * MiB);
  const ReplayResult r =
      replay(t.build(), AllocatorSettings::parse("", 113), DeviceLimits::capacity(10 * MiB));
  ASSERT_TRUE(r.oom.has_value());
  EXPECT_EQ(
      r.oom->info.message,
      "CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.00 MiB total capacity; "
      "0 bytes already allocated; 10.00 MiB free; 10.00 MiB allowed; 0 bytes reserved in "
      "total by PyTorch) If reserved memory is >> allocated memory try setting "
      "max_split_size_mb to avoid fragmentation.  See documentation for Memory Management "
      "and PYTORCH_CUDA_ALLOC_CONF");
}

TEST(CachingAllocatorTest, GarbageCollectionReleasesTheOldestWholeSegments) {
  // 100 MiB allowed, threshold 0.5. A 24 MiB block is freed (age clock 1), a 30 MiB block
  // misses the cache, takes a new segment and is freed (clock 2): 54 MiB reserved. A 40 MiB
  // request misses (clock 3): 54 > 50, so GC reclaims at least 4 MiB, oldest first: ages 2
  // and 1, average 1.5, only the 24 MiB segment goes. Reserved after: 30 + 40 = 70.
  const AllocatorSettings gc = AllocatorSettings::parse("garbage_collection_threshold:0.5");
  CachingAllocator a(gc, DeviceLimits::capacity(100 * MiB));
  a.free(a.malloc(24 * MiB));
  a.free(a.malloc(30 * MiB));
  a.malloc(40 * MiB);
  EXPECT_EQ(a.stats().reserved_bytes.current, 70 * MiB);
  // Without the threshold both stay cached: 94 MiB.
  CachingAllocator b({}, DeviceLimits::capacity(100 * MiB));
  b.free(b.malloc(24 * MiB));
  b.free(b.malloc(30 * MiB));
  b.malloc(40 * MiB);
  EXPECT_EQ(b.stats().reserved_bytes.current, 94 * MiB);
}

TEST(CachingAllocatorTest, EmptyCacheReturnsWholeSegmentsOnly) {
  // Two 3 MiB tensors share a 20 MiB segment, a 1 byte tensor has a 2 MiB one. Freeing one
  // 3 MiB tensor and the small one, empty_cache returns the small segment only: the large
  // one is still split around a live block.
  CachingAllocator a({}, {});
  const auto x = a.malloc(3 * MiB);
  a.malloc(3 * MiB);
  const auto small = a.malloc(1);
  a.free(x);
  a.free(small);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved_bytes.current, 20 * MiB);
  EXPECT_EQ(a.stats().inactive_split_bytes.current, 17 * MiB);
}

TEST(CachingAllocatorTest, PhasePeaksStartOverAtEachPhase) {
  // The first phase peaks at 8 MiB requested; the second, starting with 4 MiB live, at 6.
  TraceBuilder t;
  t.phase("train");
  t.alloc(4 * MiB);
  t.free(t.alloc(4 * MiB));
  t.phase("evaluate");
  t.alloc(2 * MiB);
  const ReplayResult r = replay_with(t, "");
  ASSERT_EQ(r.phases.size(), 2u);
  EXPECT_EQ(r.phases[0].name, "train");
  EXPECT_EQ(r.phases[0].peak_requested_bytes, 8 * MiB);
  EXPECT_EQ(r.phases[1].peak_requested_bytes, 6 * MiB);
  EXPECT_EQ(r.peak_requested_bytes, 8 * MiB);
}

TEST(CachingAllocatorTest, MalformedTracesNameTheLine) {
  const auto error_of = [](const std::string& text) -> std::string {
    std::istringstream in(text);
    try {
      read_trace(in, "t.jsonl");
    } catch (const TraceError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(
      error_of("{\"op\":\"free\",\"id\":3}\n"), "t.jsonl:1: free of id 3, which is not allocated");
  EXPECT_EQ(
      error_of("\n{\"op\":\"alloc\",\"id\":1,\"bytes\":-4}\n"),
      "t.jsonl:2: \"bytes\" must not be negative");
  EXPECT_EQ(
      error_of("{\"op\":\"alloc\",\"id\":1,\"bytes\":4}\n{\"op\":\"alloc\",\"id\":1,\"bytes\":4}"),
      "t.jsonl:2: id 1 is allocated again before its free");
  EXPECT_EQ(error_of("not json"), "t.jsonl:1: not a JSON object; each line holds one event");
  EXPECT_EQ(
      error_of("{\"op\":\"grow\"}"),
      "t.jsonl:1: unknown op \"grow\"; expected alloc, free, phase or gemm");
}

}  // namespace
}  // namespace oomguard::sim
