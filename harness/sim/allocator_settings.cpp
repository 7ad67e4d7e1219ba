#include <oomguard/sim/allocator_settings.h>

#include <stdexcept>
#include <string>

#include <oomguard/sim/alloc_conf.h>

namespace oomguard::sim {

AllocatorSettings AllocatorSettings::parse(std::string_view conf, int torch_version) {
  if (torch_version < 113)
    throw std::invalid_argument(
        "LibTorch " + std::to_string(torch_version / 100) + "." +
        std::to_string(torch_version % 100) + ": the allocator model covers 1.13 and later");
  const AllocatorSettings s = read_alloc_conf(conf, {torch_version / 100, torch_version % 100});
  if (s.cuda_malloc_async)
    throw std::invalid_argument(
        "backend:cudaMallocAsync is not modelled: the simulator follows the native caching "
        "allocator; hint: drop the backend option to predict the default allocator");
  return s;
}

}  // namespace oomguard::sim
