// harness/memory/trace_recorder.cpp and modelled_meter.cpp: what the CPU meter's observers
// see, the caching-allocator model refusing an allocation on the emulated card, and the
// cuBLAS workspaces it adds where a CUDA run would allocate them.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <c10/core/GradMode.h>

#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/memory/phase_scope.h>
#include <oomguard/memory/modelled_meter.h>
#include <oomguard/memory/trace_recorder.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/trace.h>
#include "tests/support/fixtures.h"

namespace oomguard::memory {
namespace {

constexpr int64_t MiB = 1 << 20;

class TraceTest : public testing::TrackedFixture {
 protected:
  void TearDown() override {
    set_alloc_phase("setup");  // the site is process-wide
    std::remove(path_.c_str());
    testing::TrackedFixture::TearDown();
  }
  sim::Trace read_back() const {
    std::ifstream in(path_);
    return sim::read_trace(in, path_);
  }
  // One file per test: ctest runs the tests of this fixture side by side.
  const std::string path_ = ::testing::TempDir() + "oomguard_trace_" +
                            ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                            ".jsonl";
};

TEST_F(TraceTest, RecordsEachAllocationWithItsSiteAndItsFree) {
  TraceRecorder recorder(path_);
  meter().add_observer(&recorder);
  set_alloc_phase("train");
  set_alloc_step(3);
  {
    AllocTag tag("block2.attn");
    auto a = at::empty({1000}, at::kFloat);  // 4000 bytes
  }
  meter().remove_observer(&recorder);
  recorder.close();
  const sim::Trace trace = read_back();
  ASSERT_EQ(trace.events.size(), 3u);  // phase, alloc, free
  EXPECT_EQ(trace.events[0].op, sim::TraceEvent::Op::kPhase);
  const sim::TraceEvent& alloc = trace.events[1];
  EXPECT_EQ(alloc.op, sim::TraceEvent::Op::kAlloc);
  EXPECT_EQ(alloc.bytes, 4000);
  EXPECT_EQ(trace.phases[static_cast<size_t>(alloc.phase)], "train");
  EXPECT_EQ(alloc.step, 3);
  EXPECT_EQ(trace.tags[static_cast<size_t>(alloc.tag)], "block2.attn");
  EXPECT_EQ(trace.events[2].op, sim::TraceEvent::Op::kFree);
  EXPECT_EQ(trace.events[2].slot, alloc.slot);
}

// A trace begun with a model already built: what was live comes first, so the replay's
// peak is the meter's (without it the replay missed those bytes and read low).
TEST_F(TraceTest, WhatWasLiveBeforeTheTraceIsInIt) {
  const at::Tensor model = at::empty({2 * MiB}, at::kByte);
  MeterOptions options;
  options.device = "cpu";
  options.trace_path = path_;
  options.live_by_tag = false;
  PhaseMemory figures;
  {
    MeterStack stack(options);
    set_alloc_phase("train");
    {
      PhaseScope scope(stack.meter(), figures);
      const at::Tensor activations = at::empty({MiB}, at::kByte);
    }
    stack.tracker().remove_observer(stack.recorder());
    stack.recorder()->close();
  }
  const sim::Trace trace = read_back();
  ASSERT_FALSE(trace.events.empty());
  const sim::TraceEvent& first = trace.events[1];  // after the phase event
  EXPECT_EQ(first.op, sim::TraceEvent::Op::kAlloc);
  EXPECT_EQ(trace.tags[static_cast<size_t>(first.tag)], "(before the trace)");
  EXPECT_GE(first.bytes, 2 * MiB);
  const sim::ReplayResult replayed =
      sim::replay(trace, sim::AllocatorSettings::parse(""), sim::DeviceLimits{});
  EXPECT_EQ(replayed.peak_requested_bytes, figures.peak_allocated_bytes);
}

TEST_F(TraceTest, ModelRefusesWhatTheCachingAllocatorWouldAndTheTraceKeepsIt) {
  // A 21 MiB card: a 3 MiB tensor reserves a 20 MiB segment; one more byte needs a 2 MiB
  // small segment, 22 > 21 MiB, though 3 MiB + 1 byte of tensors is far below the card.
  TraceRecorder recorder(path_);
  meter().add_observer(&recorder);  // first: it sees the refused allocation, and its free
  {
    ModelledMeter model(meter(), {}, /*device=*/{});
    model.set_capacity(21 * MiB);  // the memory fraction, as the run sets the emulated card
    auto a = at::empty({3 * MiB}, at::kByte);
    EXPECT_EQ(model.stats().reserved_bytes, 20 * MiB);
    const int64_t allocated = meter().stats().allocated_bytes;
    try {
      auto b = at::empty({1}, at::kByte);
      ADD_FAILURE() << "expected an OutOfMemoryError";
    } catch (const c10::OutOfMemoryError& e) {
      EXPECT_NE(std::string(e.what()).find("Tried to allocate 2.00 MiB"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(meter().stats().allocated_bytes, allocated);  // the refusal left no count
    EXPECT_EQ(model.stats().num_ooms, 1);
    EXPECT_EQ(model.stats().num_alloc_retries, 1);
    a.reset();
    EXPECT_EQ(model.stats().reserved_bytes, 20 * MiB);  // cached
    model.release_cache();
    EXPECT_EQ(model.stats().reserved_bytes, 0);
  }
  meter().remove_observer(&recorder);
  recorder.close();
  const sim::Trace trace = read_back();
  // The refused byte: an alloc followed at once by its free.
  size_t i = 0;
  while (i < trace.events.size() && trace.events[i].bytes != 1)
    ++i;
  ASSERT_LT(i + 1, trace.events.size());
  EXPECT_EQ(trace.events[i].op, sim::TraceEvent::Op::kAlloc);
  EXPECT_EQ(trace.events[i + 1].op, sim::TraceEvent::Op::kFree);
  EXPECT_EQ(trace.events[i + 1].slot, trace.events[i].slot);
}

// One workspace per cuBLAS handle, as on CUDA: 8,519,680 B (a T4's, sim::cublas_workspace).
constexpr int64_t kWorkspace = 8519680;

TEST_F(TraceTest, ModelAddsAWorkspaceAtTheFirstGemmOfTheForwardAndOfTheBackward) {
  ModelledMeter model(meter(), {}, /*device=*/{}, kWorkspace);
  auto a = at::ones({64, 64}).requires_grad_(true);
  const int64_t before = model.stats().predicted_allocated_bytes;
  EXPECT_EQ(model.workspace_bytes_allocated(), 0);  // no GEMM yet
  auto y = at::matmul(a, a).sum();
  EXPECT_EQ(model.workspace_bytes_allocated(), kWorkspace);  // the forward's handle
  EXPECT_TRUE(model.workspace_taken(/*backward=*/false));
  EXPECT_FALSE(model.workspace_taken(/*backward=*/true));
  y.backward();  // mm in MmBackward: autograd's handle
  EXPECT_EQ(model.workspace_bytes_allocated(), 2 * kWorkspace);
  EXPECT_TRUE(model.workspace_taken(/*backward=*/true));
  (void)at::matmul(a, a).sum();
  EXPECT_EQ(model.workspace_bytes_allocated(), 2 * kWorkspace);  // kept, never a third
  // Both in the model's allocated bytes and in one 20 MiB segment, as the CUDA run showed
  // (an H200 emulating a T4: reserved 20 MiB above the model without them).
  EXPECT_GE(model.stats().predicted_allocated_bytes - before, 2 * kWorkspace);
  EXPECT_EQ(model.stats().reserved_bytes, 22 * MiB);  // + a 2 MiB small segment for the rest
}

TEST_F(TraceTest, ModelWithoutGradientsTakesTheForwardsWorkspaceOnly) {
  ModelledMeter model(meter(), {}, /*device=*/{}, kWorkspace);
  c10::NoGradGuard no_grad;
  auto a = at::ones({64, 64});
  (void)at::matmul(a, a);
  EXPECT_EQ(model.workspace_bytes_allocated(), kWorkspace);
  EXPECT_TRUE(model.workspace_taken(/*backward=*/false));
}

TEST_F(TraceTest, ModelWithoutWorkspacesAddsNone) {
  ModelledMeter model(meter(), {}, /*device=*/{});
  auto a = at::ones({64, 64}).requires_grad_(true);
  at::matmul(a, a).sum().backward();
  EXPECT_EQ(model.workspace_bytes_allocated(), 0);
}

TEST_F(TraceTest, AWorkspaceTheCardHasNoRoomForIsAnOomAtTheNextAllocation) {
  ModelledMeter model(meter(), {}, /*device=*/{}, kWorkspace);
  model.set_capacity(4 * MiB);  // a 20 MiB segment cannot be had
  auto a = at::ones({8, 8});
  try {
    (void)at::matmul(a, a);  // the workspace is refused at the product's end
    (void)at::ones({8, 8});  // the next allocation raises it
    ADD_FAILURE() << "expected an OutOfMemoryError";
  } catch (const c10::OutOfMemoryError& e) {
    // The 8.12 MiB workspace asks for a 20 MiB segment, which PyTorch's message names.
    EXPECT_NE(std::string(e.what()).find("Tried to allocate 20.00 MiB"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(model.workspace_bytes_allocated(), 0);
  EXPECT_FALSE(model.workspace_taken(/*backward=*/false));  // asked for again at the next GEMM
}

}  // namespace
}  // namespace oomguard::memory
