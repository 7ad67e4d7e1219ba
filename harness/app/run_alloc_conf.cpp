#include "harness/app/run_alloc_conf.h"

#include <cstdlib>
#include <stdexcept>

#include "harness/log.h"
#include "harness/memory/built_torch.h"
#include "harness/memory/start_again.h"
#include "harness/usage_error.h"
#include <oomguard/sim/alloc_conf.h>

namespace oomguard::app {
namespace {

constexpr const char* kAllocConfFromConfig = "OOMGUARD_ALLOC_CONF_FROM_CONFIG";

// Throws UsageError when two of the variables disagree.
EnvAllocConf env_alloc_conf(sim::TorchVersion torch) {
  EnvAllocConf env;
  for (const char* name : sim::alloc_conf_variables(torch)) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      env.all_set = false;
    } else if (env.variable == nullptr) {
      env.variable = name;
      env.value = value;
    } else if (env.value != value) {
      throw UsageError(
          std::string(env.variable) + "=" + env.value + " and " + name + "=" + value +
          " disagree: LibTorch 2.9's CUDA allocator reads only the first, later ones read it "
          "first and their device-generic settings the second; give both one value");
    }
  }
  return env;
}

// Allocator settings under which a CUDA run's figures would not be the card's: throws
// UsageError naming why. The settings are the environment's, else memory.alloc_conf.
// - garbage_collection_threshold acts only under a memory fraction (CUDACachingAllocator.cpp:
//   `set_fraction && garbage_collection_threshold() > 0`), and an emulated card is a memory
//   fraction: the run would collect garbage where the real card, without one, never does;
// - backend:cudaMallocAsync leaves the native allocator's statistics untouched
//   (CUDAMallocAsyncAllocator.cpp, getDeviceStats): no retries or OOM counts to check.
void refuse_unmeasurable_alloc_conf(const sim::AllocatorSettings& settings, bool emulated_card) {
  if (emulated_card && settings.garbage_collection_threshold > 0)
    throw UsageError(
        "allocator setting garbage_collection_threshold on an emulated card: the card is "
        "emulated by a memory fraction, and the allocator collects garbage only under one, "
        "so this run would free cache where the real card never does; drop the setting, or "
        "run without --card/--capacity on the card itself");
  if (settings.cuda_malloc_async)
    throw UsageError(
        "allocator setting backend:cudaMallocAsync: its statistics have no allocator "
        "retries or OOM counts (CUDAMallocAsyncAllocator leaves them at 0), so oomguard "
        "cannot check this run's near-OOMs; measure with the native allocator (drop "
        "backend)");
}

}  // namespace

void check_cuda_alloc_conf(
    const std::string& config_alloc_conf,
    bool emulated_card,
    EnvAllocConf& env,
    sim::AllocatorSettings& settings) {
  const sim::TorchVersion torch = memory::built_torch_version();
  env = env_alloc_conf(torch);
  const std::string& conf = env.variable != nullptr ? env.value : config_alloc_conf;
  try {
    settings = sim::read_alloc_conf(conf, torch);
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        std::string(env.variable != nullptr ? env.variable : "config key") + ": " + e.what());
  }
  refuse_unmeasurable_alloc_conf(settings, emulated_card);
}

void apply_alloc_conf(
    char** argv,
    const std::string& config_alloc_conf,
    const EnvAllocConf& env,
    report::DeviceInfo& device) {
  const sim::TorchVersion torch = memory::built_torch_version();
  const char* ours = std::getenv(kAllocConfFromConfig);
  if (env.variable != nullptr) {
    device.alloc_conf = env.value;
    device.alloc_conf_source =
        ours != nullptr && device.alloc_conf == ours ? "config" : "environment";
    if (device.alloc_conf_source == "environment" && !config_alloc_conf.empty() &&
        config_alloc_conf != device.alloc_conf)
      log::warn(
          std::string(env.variable) + "=" + device.alloc_conf + " from the environment is used; " +
          "memory.alloc_conf=" + config_alloc_conf + " is not");
    // One variable of two given (2.9+): the process starts again with both, or 2.9's CUDA
    // allocator would not see a PYTORCH_ALLOC_CONF alone.
    if (!env.all_set)
      memory::start_again(argv, memory::alloc_conf_settings(device.alloc_conf));
    return;
  }
  if (config_alloc_conf.empty()) {
    device.alloc_conf_source = "default";
    return;
  }
  log::info(
      std::string("memory.alloc_conf: starting again with ") + sim::alloc_conf_variable(torch) +
      (sim::alloc_conf_variables(torch).size() > 1 ? " and PYTORCH_ALLOC_CONF" : "") + "=" +
      config_alloc_conf);
  memory::start_again(argv, memory::alloc_conf_settings(config_alloc_conf, kAllocConfFromConfig));
}

}  // namespace oomguard::app
