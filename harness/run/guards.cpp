#include "harness/run/guards.h"

namespace oomguard::run {

const std::vector<GuardInfo>& guard_table() {
  static const std::vector<GuardInfo> table = {
      {"no_grad_eval", &Guards::no_grad_eval, "evaluate"},
      {"truncate", &Guards::truncate, "train, evaluate"},
      {"max_new_tokens", &Guards::max_new_tokens, "generate"},
      {"kv_cap", &Guards::kv_cap, "generate"},
      {"grad_checkpoint", &Guards::grad_checkpoint, "train"},
      {"empty_cache", &Guards::empty_cache, "generate (CUDA only)"},
  };
  return table;
}

}  // namespace oomguard::run
