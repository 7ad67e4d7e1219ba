#pragma once
// The CUDA caching allocator reads its settings from the environment once, possibly as early
// as when LibTorch loads: a process asked for other settings starts again with them. A
// process asked for cuda:N starts again seeing that device alone (CUDA_VISIBLE_DEVICES), so
// that it is device 0 to LibTorch and the meter. Shared by `oomguard run` (memory.alloc_conf,
// --device) and oomguard::gtest_main (OOMGUARD_ALLOC_CONF, OOMGUARD_DEVICE).
#include <string>
#include <utility>
#include <vector>

#include <oomguard/memory/device_kind.h>

namespace oomguard::memory {

// Variables to set (name, value) before starting again.
using EnvSettings = std::vector<std::pair<std::string, std::string>>;

// `conf` in every settings variable of this LibTorch, and in `marker` when it is not null.
EnvSettings alloc_conf_settings(const std::string& conf, const char* marker = nullptr);

// What starts this process again seeing cuda:`index` alone: CUDA_VISIBLE_DEVICES first (its
// value names the GPU), then a marker of the index. Empty for cuda:0 (or no index, -1) and in the
// process so started. Throws std::invalid_argument "device cuda:N: ..." when no CUDA device is
// usable (saying why) or fewer than N + 1 are visible.
EnvSettings cuda_device_settings(int index);

// OOMGUARD_DEVICE (auto when unset) and what narrows this process to it
// (cuda_device_settings). Throws std::invalid_argument "OOMGUARD_DEVICE: ..." for a value
// parse_device_asked refuses or a cuda:N this machine cannot give.
struct DeviceFromEnv {
  DeviceAsked asked;
  EnvSettings narrowing;
};
DeviceFromEnv device_from_env();

// Replaces the process with itself run on `argv`, its environment as it is now plus
// `settings` (variables read at start-up). Does not return; throws std::runtime_error naming
// the settings, and
// std::logic_error for a null `argv` (an embedder that gave no arguments) before it changes
// the environment.
[[noreturn]] void start_again(char** argv, const EnvSettings& settings = {});

}  // namespace oomguard::memory
