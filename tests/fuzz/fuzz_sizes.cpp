// Fuzz target: the size parser (--capacity, budgets). Any text gives a byte count >= 0 or
// std::invalid_argument; the display form of a count (2 decimals of the largest binary unit)
// parses back to within 0.5% of it.
#include <cmath>
#include <stdexcept>
#include <string_view>

#include <oomguard/memory/sizes.h>
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  int64_t bytes = 0;
  try {
    bytes = memory::parse_size(text);
  } catch (const std::invalid_argument&) {
    return 0;
  }
  fuzz::require(bytes >= 0, "a parsed size is never negative");
  const int64_t back = memory::parse_size(memory::format_size(bytes));
  fuzz::require(
      std::abs(static_cast<double>(back - bytes)) <= 0.005 * static_cast<double>(bytes),
      "format_size parses back to within 0.5%");
  return 0;
}
