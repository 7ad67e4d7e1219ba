#include "harness/app/inputs.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include <oomguard/memory/sizes.h>

namespace oomguard::app {

sim::GpuRules rules_option(const std::string& text) {
  try {
    return sim::GpuRules::parse(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--rules: ") + e.what());
  }
}

std::string asked_device(const std::string& option) {
  if (!option.empty())
    return option;
  const char* env = std::getenv("OOMGUARD_DEVICE");
  return env != nullptr && *env != '\0' ? env : "auto";
}

DeviceAsked parse_device(const std::string& text, const std::string& where) {
  try {
    return memory::parse_device_asked(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(where + ": " + e.what());
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return nullptr;
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return doc.is_discarded() ? nlohmann::json(nullptr) : doc;
}

void check_writable(const std::string& path, const char* option) {
  if (path.empty())
    return;
  const std::string probe = path + ".tmp";
  std::ofstream out(probe);
  if (!out)
    throw UsageError(std::string(option) + " " + path + ": cannot be written");
  out.close();
  std::remove(probe.c_str());
}

int64_t parse_capacity(const std::string& text) {
  int64_t bytes = 0;
  try {
    bytes = memory::parse_size(text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--capacity: ") + e.what());
  }
  if (bytes <= 0)
    throw UsageError(
        "--capacity " + text +
        ": must be more than 0 bytes; leave --capacity out to run "
        "without an emulated card");
  return bytes;
}

}  // namespace oomguard::app
