#pragma once
// UsageError: what the user gave cannot be used (an option, a config key, an input file). Only
// parsing and resolving what was given throw it; the CLI answers it with exit code 2 and its
// message, before anything runs. No Torch: every library and tool may throw it.
#include <stdexcept>

namespace oomguard {

struct UsageError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace oomguard
