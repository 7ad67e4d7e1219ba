#pragma once
// The CUDA caching allocator's settings (PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF from
// 2.9), checked against what the LibTorch in use understands, before anything runs: the
// allocator reads them once, and an unknown key would otherwise fail at the first CUDA
// allocation, mid-run.
#include <string>
#include <string_view>
#include <vector>

namespace oomguard::sim {

struct TorchVersion {
  int major = 0, minor = 0;
  int number() const { return major * 100 + minor; }
};

struct AllocOption {
  std::string_view key, value;
};
// The options of `conf` in order ("k1:v1,k2:[a:b,c:d]" splits at commas outside brackets).
// Throws std::invalid_argument for an option that is not key:value.
std::vector<AllocOption> split_alloc_conf(std::string_view conf);

// Throws std::invalid_argument naming the bad option and what is allowed. Empty is valid.
void validate_alloc_conf(std::string_view conf, TorchVersion torch);

// The environment variable the allocator of that LibTorch reads first.
const char* alloc_conf_variable(TorchVersion torch);

}  // namespace oomguard::sim
