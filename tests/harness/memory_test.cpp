// harness/memory/: sizes, cards, the tracking allocator, PhaseScope.
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <numeric>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ops/empty.h>

#include <oomguard/memory/cards.h>
#include <oomguard/memory/phase_scope.h>
#include <oomguard/memory/sizes.h>
#include "tests/support/fixtures.h"

namespace oomguard::memory {
namespace {

struct SizeCase {
  const char* text;
  int64_t bytes;
};

TEST(Sizes, ParsesEveryUnit) {
  const SizeCase cases[] = {
      {"4096", 4096},
      {"512MiB", 512ll << 20},
      {"15.75GiB", 16911433728},
      {"1.5GB", 1500000000},
      {"1KiB", 1024},
      {"2KB", 2000},
      {"7B", 7}};
  for (const auto& c : cases)
    EXPECT_EQ(parse_size(c.text), c.bytes) << c.text;
}

TEST(Sizes, RejectsAnythingElse) {
  for (const char* bad :
       {"", "MiB", "1.5", "12XB", "-1MiB", "1.MiB", "1 MiB", "1mib", "99999999999999999GiB"}) {
    EXPECT_THROW(parse_size(bad), std::invalid_argument) << bad;
  }
}

TEST(Sizes, FormatsCompactlyAndRoundTrips) {
  EXPECT_EQ(format_size(512ll << 20), "512MiB");
  EXPECT_EQ(format_size(16911433728), "15.75GiB");
  EXPECT_EQ(format_size(100), "100B");
  EXPECT_EQ(parse_size(format_size(3ll << 30)), 3ll << 30);
  // The largest size there is still prints as one that parses (found by fuzzing).
  EXPECT_EQ(format_size(parse_size("9000000000GB")), "8185452.31TiB");
}

TEST(Cards, KnowTheirCapacities) {
  EXPECT_EQ(find_card("t4").total_bytes, static_cast<int64_t>(14.75 * (1ll << 30)));
  EXPECT_LT(find_card("t4").capacity_bytes(), find_card("t4").total_bytes);
  EXPECT_THROW(find_card("v100"), std::invalid_argument);
  // An H200 as PyTorch sees it (measured by ci/gpu-sanity.sh on one: 150,109,880,320 B),
  // not nvidia-smi's 143771 MiB: emulating h200 on a real one must not be refused as larger.
  EXPECT_LE(find_card("h200").total_bytes, int64_t{150109880320});
  EXPECT_GT(find_card("h200").total_bytes, static_cast<int64_t>(139.5 * (1ll << 30)));
}

using TrackingAllocatorTest = testing::TrackedFixture;

TEST_F(TrackingAllocatorTest, CountsKnownAllocationsExactly) {
  const int64_t before = meter().stats().allocated_bytes;
  const int64_t total_before = meter().total_allocated_bytes();
  meter().reset_peak();
  {
    auto a = at::empty({1000}, at::kFloat);  // 4000 bytes
    auto b = at::empty({10}, at::kDouble);   // 80 bytes
    EXPECT_EQ(meter().stats().allocated_bytes - before, 4080);
  }
  EXPECT_EQ(meter().stats().allocated_bytes, before);
  EXPECT_EQ(meter().stats().peak_allocated_bytes - before, 4080);
  EXPECT_EQ(meter().total_allocated_bytes() - total_before, 4080);
}

TEST_F(TrackingAllocatorTest, CountsExactlyFromSeveralThreads) {
  const int64_t before = meter().stats().allocated_bytes;
  meter().reset_peak();
  constexpr int kThreads = 4, kTensorsPerThread = 50;
  std::vector<std::vector<at::Tensor>> held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&held, t] {
      for (int i = 0; i < kTensorsPerThread; ++i)
        held[t].push_back(at::empty({256}, at::kByte));
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(meter().stats().allocated_bytes - before, kThreads * kTensorsPerThread * 256);
  held.clear();
  EXPECT_EQ(meter().stats().allocated_bytes, before);
}

TEST_F(TrackingAllocatorTest, UncountedAllocationsLeaveTheCountsAlone) {
  const int64_t before = meter().stats().allocated_bytes;
  auto counted = at::empty({256}, at::kFloat);  // 1 KiB, counted
  meter().set_counting(false);
  auto uncounted = at::empty({1024}, at::kFloat);
  EXPECT_EQ(meter().stats().allocated_bytes - before, 1024);
  counted.reset();  // freed while off: still subtracts what it added
  meter().set_counting(true);
  uncounted.reset();  // freed while on: it added nothing, subtracts nothing
  EXPECT_EQ(meter().stats().allocated_bytes, before);
}

TEST_F(TrackingAllocatorTest, EmulatedCapacityThrowsPyTorchsOom) {
  meter().set_capacity(meter().stats().allocated_bytes + (1 << 20));
  auto fits = at::empty({1 << 18}, at::kFloat);  // exactly 1 MiB
  try {
    auto too_much = at::empty({1}, at::kFloat);
    FAIL() << "expected an OutOfMemoryError";
  } catch (const c10::OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("Tried to allocate 0.00 MiB"), std::string::npos);
  }
}

TEST_F(TrackingAllocatorTest, StaysExactUnderConcurrentRandomTraffic) {
  // Each thread allocates and frees random sizes (0 included) and keeps `live`, the bytes it
  // knows to be held: added after an allocation, taken off before a free. So `live` never
  // exceeds what the meter holds, and every value of it seen must be under the peak.
  const int64_t before = meter().stats().allocated_bytes;
  const int64_t allocs_before = meter().num_allocations();
  const int64_t total_before = meter().total_allocated_bytes();
  meter().reset_peak();
  constexpr int kThreads = 8, kOpsPerThread = 4000;
  std::atomic<int64_t> live{0};
  std::atomic<int64_t> max_live_seen{0};
  std::vector<int64_t> allocations(kThreads, 0), requested(kThreads, 0);
  std::vector<std::vector<std::pair<c10::DataPtr, int64_t>>> held(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1234 + t);
      std::uniform_int_distribution<int64_t> size(0, 1 << 16);
      auto& mine = held[t];
      for (int op = 0; op < kOpsPerThread; ++op) {
        if (mine.empty() || rng() % 3 != 0) {
          const int64_t n = op % 97 == 0 ? 0 : size(rng);
          mine.emplace_back(meter().allocate(static_cast<size_t>(n)), n);
          ++allocations[t];
          requested[t] += n;
          const int64_t now = live.fetch_add(n) + n;
          int64_t seen = max_live_seen.load();
          while (now > seen && !max_live_seen.compare_exchange_weak(seen, now)) {
          }
        } else {
          const size_t victim = rng() % mine.size();
          std::swap(mine[victim], mine.back());
          live.fetch_sub(mine.back().second);
          mine.pop_back();  // frees
        }
      }
    });
  }
  for (auto& th : threads)
    th.join();
  const auto sum = [](const std::vector<int64_t>& v) {
    return std::accumulate(v.begin(), v.end(), int64_t{0});
  };
  EXPECT_EQ(meter().stats().allocated_bytes - before, live.load());
  EXPECT_GE(meter().stats().peak_allocated_bytes - before, max_live_seen.load());
  EXPECT_GT(max_live_seen.load(), 0);
  EXPECT_EQ(meter().num_allocations() - allocs_before, sum(allocations));
  EXPECT_EQ(meter().total_allocated_bytes() - total_before, sum(requested));
  held.clear();
  EXPECT_EQ(meter().stats().allocated_bytes, before);
}

TEST_F(TrackingAllocatorTest, ZeroBytesIsAnAllocationOfNothing) {
  const int64_t before = meter().stats().allocated_bytes;
  {
    c10::DataPtr empty = meter().allocate(0);
    EXPECT_NE(empty.get(), nullptr);
    EXPECT_EQ(meter().stats().allocated_bytes, before);
  }
  EXPECT_EQ(meter().stats().allocated_bytes, before);
}

TEST_F(TrackingAllocatorTest, ARequestNoAllocatorCanServeFailsCleanly) {
  const auto before = meter().stats();
  // Beyond what c10's allocator can get from the system (it throws), and beyond what fits
  // in the counts at all: both leave the counts as they were.
  for (size_t huge : {size_t{1} << 50, std::numeric_limits<size_t>::max()}) {
    EXPECT_THROW(meter().allocate(huge), c10::Error) << huge;
    EXPECT_EQ(meter().stats().allocated_bytes, before.allocated_bytes) << huge;
    EXPECT_EQ(meter().stats().peak_allocated_bytes, before.peak_allocated_bytes) << huge;
  }
  auto still_works = at::empty({16}, at::kFloat);
  EXPECT_EQ(meter().stats().allocated_bytes, before.allocated_bytes + 64);
}

TEST_F(TrackingAllocatorTest, FreesAfterAPeakResetCountDownFromTheReset) {
  const int64_t before = meter().stats().allocated_bytes;
  auto old = at::empty({1 << 10}, at::kFloat);  // 4 KiB from before the reset
  meter().reset_peak();
  EXPECT_EQ(meter().stats().peak_allocated_bytes, before + 4096);
  old.reset();
  EXPECT_EQ(meter().stats().allocated_bytes, before);
  EXPECT_EQ(meter().stats().peak_allocated_bytes, before + 4096);
  meter().reset_peak();
  EXPECT_EQ(meter().stats().peak_allocated_bytes, before);
}

TEST_F(TrackingAllocatorTest, PhaseScopeRecordsStartPeakAndEnd) {
  PhaseMemory record;
  const int64_t before = meter().stats().allocated_bytes;
  at::Tensor kept;
  {
    PhaseScope scope(meter(), record);
    auto scratch = at::empty({1 << 16}, at::kFloat);  // 256 KiB, freed inside
    kept = at::empty({1 << 10}, at::kFloat);          // 4 KiB, kept
  }
  EXPECT_EQ(record.start_allocated_bytes, before);
  EXPECT_EQ(record.peak_allocated_bytes, before + (1 << 18) + (1 << 12));
  EXPECT_EQ(record.end_allocated_bytes, before + (1 << 12));
}

}  // namespace
}  // namespace oomguard::memory
