#include "harness/memory/start_again.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "harness/memory/built_torch.h"
#include <oomguard/sim/alloc_conf.h>

namespace oomguard::memory {

void start_again_with_alloc_conf(const std::string& conf, char** argv, const char* marker) {
  const sim::TorchVersion torch = built_torch_version();
  EnvSettings settings;
  for (const char* variable : sim::alloc_conf_variables(torch))
    settings.emplace_back(variable, conf);
  if (marker != nullptr)
    settings.emplace_back(marker, conf);
  const char* variable = sim::alloc_conf_variable(torch);
  try {
    start_again(argv, settings);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(
        std::string("cannot start again with ") + variable + "=" + conf + ": " + e.what());
  }
}

void start_again(char** argv, const EnvSettings& settings) {
  if (argv == nullptr)
    throw std::logic_error("starting again needs the process's own arguments, and none were given");
  for (const auto& [name, value] : settings)
    ::setenv(name.c_str(), value.c_str(), 1);
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  throw std::runtime_error(std::string("execv: ") + std::strerror(errno));
}

}  // namespace oomguard::memory
