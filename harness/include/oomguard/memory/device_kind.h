#pragma once
// Where a run measures memory: the CPU (the tracking allocator) or CUDA (the caching
// allocator's statistics). Reports spell it "cpu" and "cuda".
#include <string>
#include <vector>

namespace oomguard::memory {

enum class DeviceKind { kCpu, kCuda };

const char* to_string(DeviceKind kind);  // "cpu", "cuda"
// The kind to_string spells `text`; throws std::invalid_argument naming it otherwise.
DeviceKind device_kind_from_string(const std::string& text);

// A device as OOMGUARD_DEVICE and `oomguard run --device` name it: auto, cpu, cuda, or cuda:N
// (the N-th visible CUDA device, counted from 0).
struct DeviceAsked {
  std::string kind = "auto";  // auto, cpu or cuda
  int index = -1;             // cuda:N's N; -1 when none was given
};
// Throws std::invalid_argument "device TEXT: expected auto, cpu, cuda or cuda:N ...".
DeviceAsked parse_device_asked(const std::string& text);

// The CUDA_VISIBLE_DEVICES value of each of the `device_count` devices a process sees: its own
// list where it has one ("4,6": "4", "6"), else "0", "1", ...; what names device N to a child.
std::vector<std::string> visible_gpus(int device_count, const char* cuda_visible_devices);

}  // namespace oomguard::memory
