#include <oomguard/memory/device_kind.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace oomguard::memory {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCuda:
      return "cuda";
    case DeviceKind::kMeta:
      return "meta";
    case DeviceKind::kCpu:
      break;
  }
  return "cpu";
}

DeviceKind device_kind_from_string(const std::string& text) {
  if (text == "cpu")
    return DeviceKind::kCpu;
  if (text == "cuda")
    return DeviceKind::kCuda;
  if (text == "meta")
    return DeviceKind::kMeta;
  throw std::invalid_argument("\"" + text + "\" is not a device (cpu, cuda or meta)");
}

DeviceAsked parse_device_asked(const std::string& text) {
  if (text == "auto" || text == "cpu" || text == "cuda" || text == "meta")
    return {text, -1};
  const std::string digits = text.rfind("cuda:", 0) == 0 ? text.substr(5) : "";
  if (digits.empty() || digits.size() > 4 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument(
        "device " + text +
        ": expected auto, cpu, cuda, cuda:N (N counts the visible CUDA devices from 0) or meta "
        "(shapes alone)");
  return {"cuda", std::stoi(digits)};
}

std::vector<std::string> visible_gpus(int device_count, const char* cuda_visible_devices) {
  std::vector<std::string> listed;
  if (cuda_visible_devices != nullptr && *cuda_visible_devices != '\0') {
    std::string text = cuda_visible_devices;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t comma = std::min(text.find(',', at), text.size());
      listed.push_back(text.substr(at, comma - at));
      at = comma + 1;
    }
  }
  std::vector<std::string> gpus;
  for (int i = 0; i < device_count; ++i)
    gpus.push_back(
        i < static_cast<int>(listed.size()) ? listed[static_cast<size_t>(i)] : std::to_string(i));
  return gpus;
}

}  // namespace oomguard::memory
