#pragma once
// The guards against flaky OOMs (DESIGN.md): each one a switch, all on by default.
#include <vector>

namespace oomguard::run {

struct Guards {
  bool no_grad_eval = true;     // evaluate under NoGradGuard + eval(), nothing kept
  bool truncate = true;         // the collator cuts to data.max_length: one shape
  bool max_new_tokens = true;   // generation stops after generate.max_new_tokens
  bool kv_cap = true;           // static KV cache, allocated once, never grown by cat
  bool grad_checkpoint = true;  // recompute block activations in backward (checkpoint.h)
  bool empty_cache = true;      // release cached blocks after generation (CUDA only)
};

struct GuardInfo {
  const char* name;
  bool Guards::*flag;
  const char* protects;  // the phase whose peak it keeps down
};

// Every guard, in DESIGN.md's order.
const std::vector<GuardInfo>& guard_table();

}  // namespace oomguard::run
