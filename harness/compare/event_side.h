#pragma once
// Traces (oomguard run --trace) and PyTorch memory snapshots as sides of a comparison: replayed
// through the caching-allocator model for their figures (event_side.cpp).
#include <string>

#include "harness/compare/sides.h"

namespace oomguard::compare {

// A snapshot pickle, or a trace (its first line an event, {"op": ...}).
bool is_event_side(const std::string& bytes);

// The side of a trace or snapshot: one test ("trace" or "snapshot"), its phases replayed with
// the default (a snapshot: its recorded) allocator settings and no CPU-to-GPU rules. Throws
// InputError naming the file for a malformed one.
Side read_event_side(const std::string& bytes, const std::string& path);

}  // namespace oomguard::compare
