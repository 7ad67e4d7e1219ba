// harness/app/inputs: what several commands read from their options, refused with a
// UsageError naming the option and the value.
#include <gtest/gtest.h>

#include <string>

#include "harness/app/inputs.h"

namespace oomguard::app {
namespace {

// memory::parse_device_asked (tests/harness/device_kind_test.cpp), its refusal a UsageError
// naming where the device was asked for.
TEST(Inputs, DevicesAreParsedAndRefusedNamingTheirSource) {
  EXPECT_EQ(parse_device("cuda:1", "--device").index, 1);
  try {
    parse_device("tpu", "OOMGUARD_DEVICE");
    ADD_FAILURE() << "tpu was taken";
  } catch (const UsageError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("OOMGUARD_DEVICE: device tpu: expected", 0), 0u)
        << e.what();
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
