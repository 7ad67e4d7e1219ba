// replay's account of what is live at each phase's peak, on traces whose answer is known.
#include <gtest/gtest.h>

#include <oomguard/sim/replay.h>
#include "tests/sim/trace_builder.h"

namespace oomguard::sim {
namespace {

int64_t sum(const std::vector<TagBytes>& live) {
  int64_t total = 0;
  for (const auto& t : live)
    total += t.bytes;
  return total;
}

TEST(ReplayTest, LiveAtPeakIsWhatWasLiveWhenRequestedBytesPeaked) {
  // train peaks at 5 MiB after `attn` (1 + 2 MiB) and `mlp` (2 MiB); a later, lower moment
  // (attn freed, 1 MiB of head) must not count. evaluate starts with mlp's 2 MiB live and
  // peaks at 5 MiB with an untagged 3 MiB (its start, 3 MiB with head, is lower).
  TraceBuilder t;
  t.phase("train");
  const int64_t a1 = t.alloc(1 * kMiB, "attn");
  const int64_t a2 = t.alloc(2 * kMiB, "attn");
  t.alloc(2 * kMiB, "mlp");
  t.free(a1);
  t.free(a2);
  const int64_t h = t.alloc(1 * kMiB, "head");
  t.phase("evaluate");
  t.free(h);
  t.alloc(3 * kMiB);
  const ReplayResult r = replay(t.build(), AllocatorSettings{}, DeviceLimits{});
  ASSERT_EQ(r.phases.size(), 2u);
  const auto& train = r.phases[0].live_at_peak;
  ASSERT_EQ(train.size(), 2u);
  EXPECT_EQ(train[0].tag, "attn");
  EXPECT_EQ(train[0].bytes, 3 * kMiB);
  EXPECT_EQ(train[1].tag, "mlp");
  EXPECT_EQ(train[1].bytes, 2 * kMiB);
  const auto& evaluate = r.phases[1].live_at_peak;
  ASSERT_EQ(evaluate.size(), 2u);
  EXPECT_EQ(evaluate[0].tag, "(untagged)");
  EXPECT_EQ(evaluate[0].bytes, 3 * kMiB);
  EXPECT_EQ(evaluate[1].tag, "mlp");
  EXPECT_EQ(evaluate[1].bytes, 2 * kMiB);
  EXPECT_EQ(sum(evaluate), r.phases[1].peak_requested_bytes);
}

TEST(ReplayTest, LiveAtPeakKeepsFiveTagsAndSumsTheRest) {
  // Seven tags of 7, 6, ... 1 MiB: the five largest by name, then 2 + 1 MiB as (rest).
  TraceBuilder t;
  t.phase("train");
  const char* tags[] = {"t7", "t6", "t5", "t4", "t3", "t2", "t1"};
  for (int k = 0; k < 7; ++k)
    t.alloc((7 - k) * kMiB, tags[k]);
  const ReplayResult r = replay(t.build(), AllocatorSettings{}, DeviceLimits{});
  const auto& live = r.phases[0].live_at_peak;
  ASSERT_EQ(live.size(), 6u);
  for (int k = 0; k < 5; ++k) {
    EXPECT_EQ(live[static_cast<size_t>(k)].tag, tags[k]);
    EXPECT_EQ(live[static_cast<size_t>(k)].bytes, (7 - k) * kMiB);
  }
  EXPECT_EQ(live[5].tag, "(rest)");
  EXPECT_EQ(live[5].bytes, 3 * kMiB);
  EXPECT_EQ(sum(live), r.phases[0].peak_requested_bytes);
}

}  // namespace
}  // namespace oomguard::sim
