#pragma once
// TraceBuilder: the allocator-model tests' traces, written event by event.
#include <cstdint>
#include <sstream>
#include <string>

#include <oomguard/sim/trace.h>

namespace oomguard::sim {

// A trace written event by event, as `oomguard run --trace` would write it.
class TraceBuilder {
 public:
  int64_t alloc(int64_t bytes, const char* tag = "") {
    text_ += alloc_line(next_id_, bytes, phase_, step_, tag) + "\n";
    return next_id_++;
  }
  void free(int64_t id) { text_ += free_line(id) + "\n"; }
  void phase(const char* name) {
    phase_ = name;
    text_ += phase_line(name) + "\n";
  }
  void step(int64_t s) { step_ = s; }
  Trace build() const {
    std::istringstream in(text_);
    return read_trace(in, "test");
  }

 private:
  std::string text_;
  std::string phase_ = "test";
  int64_t step_ = 0;
  int64_t next_id_ = 1;
};

}  // namespace oomguard::sim
