#pragma once
// Where a run measures memory: the CPU (the tracking allocator), CUDA (the caching
// allocator's statistics) or the Meta device (shapes alone, counted by oomguard's Meta
// allocator). Reports spell it "cpu", "cuda" and "meta".
#include <string>
#include <vector>

namespace oomguard::memory {

enum class DeviceKind { kCpu, kCuda, kMeta };

const char* to_string(DeviceKind kind);  // "cpu", "cuda", "meta"
// The kind to_string spells `text`; throws std::invalid_argument naming it otherwise.
DeviceKind device_kind_from_string(const std::string& text);

// A device as OOMGUARD_DEVICE and `oomguard run --device` name it: auto, cpu, cuda, cuda:N
// (the N-th visible CUDA device, counted from 0) or meta.
struct DeviceAsked {
  std::string kind = "auto";  // auto, cpu, cuda or meta
  int index = -1;             // cuda:N's N; -1 when none was given
};
// Throws std::invalid_argument "device TEXT: expected auto, cpu, cuda, cuda:N or meta ...".
DeviceAsked parse_device_asked(const std::string& text);

// The CUDA_VISIBLE_DEVICES value of each of the `device_count` devices a process sees: its own
// list where it has one ("4,6": "4", "6"), else "0", "1", ...; what names device N to a child.
std::vector<std::string> visible_gpus(int device_count, const char* cuda_visible_devices);

}  // namespace oomguard::memory
