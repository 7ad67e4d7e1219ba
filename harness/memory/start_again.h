#pragma once
// The CUDA caching allocator reads its settings from the environment once, possibly as early
// as when LibTorch loads: a process asked for other settings starts again with them. Shared
// by `oomguard run` (memory.alloc_conf) and oomguard::gtest_main (OOMGUARD_ALLOC_CONF).
#include <string>
#include <utility>
#include <vector>

namespace oomguard::memory {

// Puts `conf` into every settings variable of this LibTorch (sim::alloc_conf_variables), and also
// into `marker` when it is not null (so the process knows the value came from it), then replaces
// the process with itself run on `argv`. Does not return; throws std::runtime_error when it cannot
// start again.
[[noreturn]] void start_again_with_alloc_conf(
    const std::string& conf, char** argv, const char* marker = nullptr);

// Variables to set (name, value) before starting again.
using EnvSettings = std::vector<std::pair<std::string, std::string>>;

// Replaces the process with itself run on `argv`, its environment as it is now plus
// `settings` (variables read at start-up). Does not return; throws std::runtime_error, and
// std::logic_error for a null `argv` (an embedder that gave no arguments) before it changes
// the environment.
[[noreturn]] void start_again(char** argv, const EnvSettings& settings = {});

}  // namespace oomguard::memory
