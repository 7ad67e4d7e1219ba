#include <oomguard/memory/device_kind.h>

#include <stdexcept>

namespace oomguard::memory {

const char* to_string(DeviceKind kind) {
  return kind == DeviceKind::kCuda ? "cuda" : "cpu";
}

DeviceKind device_kind_from_string(const std::string& text) {
  if (text == "cpu")
    return DeviceKind::kCpu;
  if (text == "cuda")
    return DeviceKind::kCuda;
  throw std::invalid_argument("\"" + text + "\" is not a device (cpu or cuda)");
}

}  // namespace oomguard::memory
