#pragma once
// A CUDA run's allocator settings: the environment's, else the config's memory.alloc_conf;
// refused where the run could not measure under them, and put into the environment (the
// process starting again) before LibTorch's caching allocator reads them. Used by
// harness/app/run.cpp; no Torch header.
#include <string>

#include "harness/report/run_report.h"
#include <oomguard/sim/allocator_settings.h>

namespace oomguard::app {

// The allocator settings the environment gives this LibTorch (PYTORCH_CUDA_ALLOC_CONF, from
// 2.9 also PYTORCH_ALLOC_CONF): the first of its variables that is set, and whether every one
// of them is.
struct EnvAllocConf {
  const char* variable = nullptr;  // null: none set
  std::string value;
  bool all_set = true;
};

// A CUDA run's allocator settings: the environment's (read once into `env`), else
// `config_alloc_conf` (memory.alloc_conf, checked when the config was read), into `settings`;
// throws UsageError where the environment's are malformed or the run could not measure under
// them (on an `emulated_card` too).
void check_cuda_alloc_conf(
    const std::string& config_alloc_conf,
    bool emulated_card,
    EnvAllocConf& env,
    sim::AllocatorSettings& settings);

// The caching allocator reads its settings from the environment once, possibly as early as
// when LibTorch loads. So memory.alloc_conf (`config_alloc_conf`) goes into the environment and
// the process starts again with it (execv does not return); a value already there (`env`) is
// respected. `device` gets the settings in effect and where they came from.
void apply_alloc_conf(
    char** argv,
    const std::string& config_alloc_conf,
    const EnvAllocConf& env,
    report::DeviceInfo& device);

}  // namespace oomguard::app
