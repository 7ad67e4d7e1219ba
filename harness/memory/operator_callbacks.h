#pragma once
// The operator callbacks (RecordFunction) that the allocator model's rules and the trace
// recorder share (harness/memory/operator_callbacks.cpp): registered once per process and
// never removed, they do nothing while no one watches.
#include <cstdint>
#include <utility>

#include <oomguard/memory/alloc_site.h>

namespace at {
struct RecordFunction;
}

namespace oomguard::memory {

class TraceRecorder;

// An autograd node: the thread that made it and its sequence number on that thread.
using NodeKey = std::pair<uint64_t, uint64_t>;

// What hears every operator and autograd node of the process: the allocator model
// (ModelledMeter), for its CPU-to-GPU rules. Called on the running thread with the
// callbacks' mutex held (one call at a time), never after unwatch_operators has returned.
class OperatorWatcher {
 public:
  // An operator (RecordScope::FUNCTION, its inputs and outputs recorded) begins or ends;
  // `inside_backward`: within an autograd node's backward.
  virtual void on_operator_start(const at::RecordFunction& fn) = 0;
  virtual void on_operator_end(const at::RecordFunction& fn, bool inside_backward) = 0;
  // An autograd node's backward begins (`start`) or ends.
  virtual void on_backward_node(const NodeKey& node, bool start) = 0;
  // A hook a rule put on an autograd node (release_hook) is destroyed with the node.
  virtual void on_node_released(int64_t token) = 0;

 protected:
  ~OperatorWatcher() = default;
};

// `watcher` hears every operator from now on; one at a time per process: throws
// std::logic_error when another watches.
void watch_operators(OperatorWatcher* watcher);
// `watcher` hears none from now on; waits for a callback using it.
void unwatch_operators(OperatorWatcher* watcher);
// Tells the watcher, if any, that the node holding `token`'s hook is gone.
void node_released(int64_t token);

// The operators that take a cuBLAS handle on CUDA (at::cuda::getCurrentCUDABlasHandle, whose
// first use on a thread allocates the workspace): matrix products of every shape.
bool is_gemm(const char* name);

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
