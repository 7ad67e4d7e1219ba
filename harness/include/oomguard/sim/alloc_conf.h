#pragma once
// The CUDA caching allocator's settings (PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF from
// 2.9), checked against what the LibTorch in use understands, before anything runs: the
// allocator reads them once, and an unknown key would otherwise fail at the first CUDA
// allocation, mid-run.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <oomguard/sim/allocator_settings.h>

namespace oomguard::sim {

struct TorchVersion {
  int major = 0, minor = 0;
  int number() const { return major * 100 + minor; }
  std::string text() const { return std::to_string(major) + "." + std::to_string(minor); }
};

// The settings `conf` ("key:value,key:[a:b,c:d]"; "" gives the defaults) asks of the
// allocator of LibTorch `torch`, each option checked as it is read: throws
// std::invalid_argument naming the option and what is allowed, for an option that is not
// key:value, one that version does not know, or a value it would refuse. Options without
// effect on device memory (pinned_*, release_lock_on_cudamalloc) are checked and not kept.
AllocatorSettings read_alloc_conf(std::string_view conf, TorchVersion torch);

// read_alloc_conf's checks alone.
void validate_alloc_conf(std::string_view conf, TorchVersion torch);

// The environment variable the CUDA allocator of that LibTorch reads first:
// PYTORCH_CUDA_ALLOC_CONF in every version (c10/cuda/CUDAAllocatorConfig.h).
const char* alloc_conf_variable(TorchVersion torch);

// Every variable that LibTorch reads the allocator settings from; oomguard sets each of them
// to the same value, which every version then reads alike. 1.13-2.8: PYTORCH_CUDA_ALLOC_CONF.
// 2.9 and later add PYTORCH_ALLOC_CONF: 2.9's CUDA allocator ignores it while its
// device-generic config reads it first (pytorch/pytorch#183387), and from 2.10 the CUDA
// allocator reads it after PYTORCH_CUDA_ALLOC_CONF.
std::vector<const char*> alloc_conf_variables(TorchVersion torch);

// Whether the expandable_segments that `settings` ask for took effect, from the segments a CUDA
// allocator held (`segments`, of which `expandable`, read back from it): a LibTorch that reads
// another variable, or a device that cannot map memory, ignores the setting silently.
// "in effect: 2 of 2 segments expandable"; "not in effect: ..." when asked and none is;
// "unknown: ..." when no segment was held; "" when not asked and none is expandable.
std::string expandable_segments_effect(
    const AllocatorSettings& settings, int64_t segments, int64_t expandable);

}  // namespace oomguard::sim
