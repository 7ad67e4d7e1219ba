// harness/memory/device_kind.cpp: what OOMGUARD_DEVICE and --device accept, and the names of
// the CUDA devices a process sees; harness/memory/start_again.cpp: what narrows a process to
// cuda:N.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/memory/start_again.h"
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/device_kind.h>

namespace oomguard::memory {
namespace {

TEST(DeviceKind, AskedIsAutoCpuCudaOrCudaN) {
  EXPECT_EQ(parse_device_asked("auto").kind, "auto");
  EXPECT_EQ(parse_device_asked("cpu").index, -1);
  EXPECT_EQ(parse_device_asked("cuda").kind, "cuda");
  const DeviceAsked second = parse_device_asked("cuda:1");
  EXPECT_EQ(second.kind, "cuda");
  EXPECT_EQ(second.index, 1);
  for (const char* bad : {"tpu", "cuda:", "cuda:-1", "cuda:one", "cuda:12345", "CUDA", "cuda:1x"}) {
    try {
      parse_device_asked(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("device ") + bad + ": expected", 0), 0u)
          << e.what();
    }
  }
}

TEST(DeviceKind, VisibleGpusFollowTheProcesssOwnList) {
  EXPECT_EQ(visible_gpus(2, nullptr), (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(visible_gpus(2, "4,6"), (std::vector<std::string>{"4", "6"}));
  EXPECT_EQ(visible_gpus(1, "GPU-abc,GPU-def"), (std::vector<std::string>{"GPU-abc"}));
  EXPECT_TRUE(visible_gpus(0, "").empty());
}

// Sets a variable for its life, then puts back what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name))
      old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Narrowing to cuda:N: nothing for cuda:0 or a process already narrowed to N; where the
// device cannot be had, a refusal naming it and why.
TEST(DeviceKind, NarrowingToCudaNIsRefusedWhereItCannotBeHad) {
  EXPECT_TRUE(cuda_device_settings(-1).empty());
  EXPECT_TRUE(cuda_device_settings(0).empty());
  if (cuda_device_count() > 1)
    GTEST_SKIP() << "this machine has cuda:1";
  try {
    cuda_device_settings(1);
    ADD_FAILURE() << "cuda:1 was taken with " << cuda_device_count() << " device(s) visible";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("device cuda:1: ", 0), 0u) << e.what();
    const std::string why = cuda_unavailable_reason();
    if (!why.empty()) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
  const ScopedEnv narrowed("OOMGUARD_CUDA_DEVICE_NARROWED_TO", "1");  // started again for cuda:1
  EXPECT_TRUE(cuda_device_settings(1).empty());
  EXPECT_THROW(cuda_device_settings(2), std::invalid_argument);
}

}  // namespace
}  // namespace oomguard::memory
