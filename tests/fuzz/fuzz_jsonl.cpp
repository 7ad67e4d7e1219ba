// Fuzz target: the data-file reader. The first byte picks plain text or JSON Lines; the rest
// is the file. It gives samples or std::invalid_argument naming the file, nothing else; no
// plain-text sample is empty.
#include <sstream>
#include <stdexcept>
#include <string>

#include "data/text_source.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  if (size == 0)
    return 0;
  const bool jsonl = data[0] & 1;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  try {
    const auto samples = data::parse_samples(in, "fuzz.jsonl", jsonl);
    fuzz::require(!samples.empty(), "a file that parses holds samples");
    for (const auto& s : samples) {
      fuzz::require(jsonl || !s.empty(), "plain-text samples are non-empty lines");
    }
  } catch (const std::invalid_argument& e) {
    fuzz::require(
        std::string(e.what()).rfind("data file fuzz.jsonl", 0) == 0, "the message names the file");
  }
  return 0;
}
