#pragma once
// TagBytes: bytes requested by live allocations of one tag (the model part that allocated
// them, an operator's name, or a snapshot's frame), as reports list them at a phase's peak.
#include <cstdint>
#include <string>

namespace oomguard::memory {

struct TagBytes {
  std::string tag;  // "(untagged)" for allocations without one, "(rest)" for the others
  int64_t bytes = 0;

  bool operator==(const TagBytes& o) const { return tag == o.tag && bytes == o.bytes; }
};

}  // namespace oomguard::memory
