#pragma once
// Where the run is when it allocates: the phase, its step and a tag naming the part of the
// model, written beside each allocation of the trace (`oomguard run --trace`). Process-wide,
// so allocations from worker threads carry the main thread's site. Names must outlive the
// run (string literals, or strings the model keeps).
#include <cstdint>

namespace oomguard::memory {

struct AllocSite {
  const char* phase;
  int64_t step;  // -1 outside a phase's loop
  const char* tag;
};

// The site an allocation made now belongs to.
AllocSite alloc_site();
// The phase of the allocations from now on; also resets the step to -1.
void set_alloc_phase(const char* phase);
// The step of the phase's loop the allocations from now on belong to.
void set_alloc_step(int64_t step);

// Tags the allocations of a scope; scopes nest, the innermost wins.
class AllocTag {
 public:
  // Allocations until this object is destroyed carry `tag` (a string that outlives them).
  explicit AllocTag(const char* tag);
  ~AllocTag();
  AllocTag(const AllocTag&) = delete;
  AllocTag& operator=(const AllocTag&) = delete;

 private:
  const char* previous_;
};

}  // namespace oomguard::memory
