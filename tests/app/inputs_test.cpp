// harness/app/inputs: what several commands read from their options, refused with a
// UsageError naming the option and the value.
#include <gtest/gtest.h>

#include <string>

#include "harness/app/inputs.h"

namespace oomguard::app {
namespace {

TEST(Inputs, DevicesAreAutoCpuCudaOrCudaN) {
  EXPECT_EQ(parse_device("auto", "--device").kind, "auto");
  EXPECT_EQ(parse_device("cpu", "--device").index, -1);
  EXPECT_EQ(parse_device("cuda", "--device").kind, "cuda");
  const DeviceAsked second = parse_device("cuda:1", "--device");
  EXPECT_EQ(second.kind, "cuda");
  EXPECT_EQ(second.index, 1);
  for (const char* bad : {"tpu", "cuda:", "cuda:-1", "cuda:one", "cuda:12345", "CUDA", "cuda:1x"}) {
    try {
      parse_device(bad, "OOMGUARD_DEVICE");
      ADD_FAILURE() << bad << " was taken";
    } catch (const UsageError& e) {
      EXPECT_NE(
          std::string(e.what()).find(std::string("OOMGUARD_DEVICE: device ") + bad + ": expected"),
          std::string::npos)
          << e.what();
    }
  }
}

TEST(Inputs, ACapacityIsASizeAboveZero) {
  EXPECT_EQ(parse_capacity("1MiB"), 1 << 20);
  EXPECT_THROW(parse_capacity("0"), UsageError);
  EXPECT_THROW(parse_capacity("12XB"), UsageError);
}

TEST(Inputs, GivenTurnsALibrarysRefusalIntoAUsageError) {
  EXPECT_THROW(given([]() -> int { throw std::invalid_argument("bad input"); }), UsageError);
  EXPECT_THROW(given([]() -> int { throw std::runtime_error("disk"); }), std::runtime_error);
  EXPECT_EQ(given([] { return 7; }), 7);
}

}  // namespace
}  // namespace oomguard::app
