#pragma once
// The operator callbacks (RecordFunction) that the allocator model (ModelledMeter) and the
// trace recorder share: registered once per process, they do nothing while neither watches.
#include <oomguard/memory/alloc_site.h>

namespace oomguard::memory {

class TraceRecorder;

// From now on `recorder` hears of every matrix product's end (every recorder so watching).
void watch_gemms_for(TraceRecorder* recorder);
// `recorder` hears of none from now on; waits for a callback using it.
void unwatch_gemms_for(TraceRecorder* recorder);

// Allocations outside every AllocTag named by the outermost operator or autograd node running
// on the allocating thread (an intra-op worker: the last one begun) when they are made
// (harness/memory/operator_names.cpp). Counted: naming stays on until every `true` has had
// its `false`; while it is off, no callback runs.
void name_untagged_by_operator(bool on);
// "untagged: aten::linear", "untagged: AddmmBackward0"; "" outside operators or when off.
const char* current_operator_label();
// The tag an allocation at `site` is filed under: its AllocTag, else the operator's label.
inline const char* allocation_tag(const AllocSite& site) {
  return site.tag != nullptr && *site.tag != '\0' ? site.tag : current_operator_label();
}

}  // namespace oomguard::memory
