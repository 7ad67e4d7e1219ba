#pragma once
// Where a run measures memory: the CPU (the tracking allocator) or CUDA (the caching
// allocator's statistics). Reports spell it "cpu" and "cuda".
#include <string>

namespace oomguard::memory {

enum class DeviceKind { kCpu, kCuda };

const char* to_string(DeviceKind kind);  // "cpu", "cuda"
// The kind to_string spells `text`; throws std::invalid_argument naming it otherwise.
DeviceKind device_kind_from_string(const std::string& text);

}  // namespace oomguard::memory
