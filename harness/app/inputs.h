#pragma once
// What several commands read from their options, checked the same way. Each function throws
// UsageError naming the option and the bad value. No Torch.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "harness/usage_error.h"
#include <nlohmann/json.hpp>

#include <oomguard/memory/device_kind.h>
#include <oomguard/sim/gpu_rules.h>

namespace oomguard::app {

// Returns read(): reading what the user gave (an input file, an option's value) through a
// library that refuses bad input with std::invalid_argument, which becomes a UsageError.
template <typename Read>
auto given(Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const UsageError&) {
    throw;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

// --rules (run, replay): the CPU-to-GPU rules.
sim::GpuRules rules_option(const std::string& text);

// The device asked for: `option` (--device) when given, else OOMGUARD_DEVICE, else "auto".
std::string asked_device(const std::string& option);

// Parses what asked_device returned (memory::parse_device_asked); `where` names its source for
// the message (--device, OOMGUARD_DEVICE).
using memory::DeviceAsked;
DeviceAsked parse_device(const std::string& text, const std::string& where);

// `--capacity TEXT` of run, replay and plot: a size above 0 bytes (parse_size's units); 0
// would silently mean no card at all.
int64_t parse_capacity(const std::string& text);

// The JSON document in the file `path`; null when it cannot be opened or is not JSON.
nlohmann::json read_json_file(const std::string& path);

// Refuses `path` for `option` when it cannot be written (checked by writing and removing
// path + ".tmp", the name write_file_atomically uses). An empty path passes.
void check_writable(const std::string& path, const char* option);

}  // namespace oomguard::app
