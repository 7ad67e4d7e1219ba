#include "harness/memory/start_again.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/memory/built_torch.h"
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/device_kind.h>
#include <oomguard/sim/alloc_conf.h>

namespace oomguard::memory {
namespace {

// Set in a process started again seeing cuda:N alone: N (its device 0 is that device).
constexpr const char* kNarrowedTo = "OOMGUARD_CUDA_DEVICE_NARROWED_TO";

}  // namespace

EnvSettings alloc_conf_settings(const std::string& conf, const char* marker) {
  EnvSettings settings;
  for (const char* variable : sim::alloc_conf_variables(built_torch_version()))
    settings.emplace_back(variable, conf);
  if (marker != nullptr)
    settings.emplace_back(marker, conf);
  return settings;
}

EnvSettings cuda_device_settings(int index) {
  const char* narrowed = std::getenv(kNarrowedTo);
  if (index <= 0 || (narrowed != nullptr && std::to_string(index) == narrowed))
    return {};
  const std::string device = "device cuda:" + std::to_string(index) + ": ";
  if (const std::string why = cuda_unavailable_reason(); !why.empty())
    throw std::invalid_argument(device + why);
  const int count = cuda_device_count();
  if (index >= count)
    throw std::invalid_argument(
        device + std::to_string(count) +
        " CUDA device(s) visible, cuda:0 .. cuda:" + std::to_string(count - 1));
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  return {
      {"CUDA_VISIBLE_DEVICES", visible_gpus(count, visible)[static_cast<size_t>(index)]},
      {kNarrowedTo, std::to_string(index)}};
}

DeviceFromEnv device_from_env() {
  DeviceFromEnv out;
  const char* device = std::getenv("OOMGUARD_DEVICE");
  if (device == nullptr || *device == '\0')
    return out;
  try {
    out.asked = parse_device_asked(device);
    out.narrowing = cuda_device_settings(out.asked.index);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("OOMGUARD_DEVICE: ") + e.what());
  }
  return out;
}

void start_again(char** argv, const EnvSettings& settings) {
  if (argv == nullptr)
    throw std::logic_error("starting again needs the process's own arguments, and none were given");
  for (const auto& [name, value] : settings)
    ::setenv(name.c_str(), value.c_str(), 1);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  const std::string why = std::strerror(errno);
  std::string with;
  for (const auto& [name, value] : settings)
    with += (with.empty() ? " with " : ", ") + name + "=" + value;
  throw std::runtime_error("cannot start again" + with + ": execv: " + why);
}

}  // namespace oomguard::memory
