// The process-wide operator callbacks: one RecordFunction callback for operators (with their
// inputs and outputs) and one for autograd nodes' backward, registered at the first watch and
// never removed (removing one is only safe while no other code runs). They pass what they
// hear to the watcher and the trace recorders under a mutex that unwatching takes, so a
// watcher being destroyed waits for a callback using it.
#include "harness/memory/operator_callbacks.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <vector>

#include <ATen/record_function.h>

#include <oomguard/memory/trace_recorder.h>

namespace oomguard::memory {
namespace {

std::mutex watcher_mutex;
OperatorWatcher* watcher = nullptr;       // guarded by watcher_mutex
std::vector<TraceRecorder*> gemm_traces;  // guarded by watcher_mutex
std::atomic<bool> watched{false};         // either is set: the callbacks' fast path
std::atomic<bool> has_watcher{false};     // the watcher is set: every operator concerns it
// Autograd nodes this thread is inside: a GEMM there is the backward's.
thread_local int backward_depth = 0;

NodeKey node_key(const at::RecordFunction& fn) {
  return {fn.forwardThreadId(), static_cast<uint64_t>(fn.seqNr())};
}

// Autograd nodes' backward, without their inputs: recording them would keep each incoming
// gradient referenced while the node runs, so AccumulateGrad would copy a gradient it steals
// otherwise, an allocation the run without oomguard does not make.
std::unique_ptr<at::ObserverContext> on_node_start(const at::RecordFunction& fn) {
  ++backward_depth;
  if (watched.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      watcher->on_backward_node(node_key(fn), /*start=*/true);
  }
  return nullptr;
}

void on_node_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (backward_depth > 0)
    --backward_depth;
  if (watched.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      watcher->on_backward_node(node_key(fn), /*start=*/false);
  }
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  if (!has_watcher.load(std::memory_order_acquire))
    return nullptr;
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher != nullptr)
    watcher->on_operator_start(fn);
  return nullptr;
}

// At the GEMM's end: on CUDA the handle, and its workspace, is taken inside the kernel's
// launch, after the output (and any contiguous copies of the inputs) exist.
void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!watched.load(std::memory_order_acquire))
    return;
  const bool gemm = is_gemm(fn.name());
  if (!gemm && !has_watcher.load(std::memory_order_acquire))
    return;  // trace recorders alone: only GEMMs concern them
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher != nullptr)
    watcher->on_operator_end(fn, backward_depth > 0);
  if (gemm)
    for (TraceRecorder* trace : gemm_traces)
      trace->on_gemm(backward_depth > 0);
}

void register_callbacks() {
  static std::once_flag once;
  std::call_once(once, [] {
    at::addGlobalCallback(at::RecordFunctionCallback(on_op_start, on_op_end)
                              .needsInputs(true)
                              .needsOutputs(true)
                              .scopes({at::RecordScope::FUNCTION}));
    at::addGlobalCallback(at::RecordFunctionCallback(on_node_start, on_node_end)
                              .needsInputs(false)
                              .scopes({at::RecordScope::BACKWARD_FUNCTION}));
  });
}

void set_watched() {  // with watcher_mutex held
  has_watcher.store(watcher != nullptr, std::memory_order_release);
  watched.store(watcher != nullptr || !gemm_traces.empty(), std::memory_order_release);
}

}  // namespace

bool is_gemm(const char* name) {
  static const char* const kGemms[] = {
      "aten::mm",
      "aten::addmm",
      "aten::_addmm_activation",
      "aten::bmm",
      "aten::baddbmm",
      "aten::addbmm",
      "aten::mv",
      "aten::addmv",
      "aten::dot",
      "aten::vdot"};
  for (const char* gemm : kGemms)
    if (std::strcmp(name, gemm) == 0)
      return true;
  return false;
}

void watch_operators(OperatorWatcher* w) {
  register_callbacks();
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher != nullptr && watcher != w)
    throw std::logic_error("another allocator model already watches operators");
  watcher = w;
  set_watched();
}

void unwatch_operators(OperatorWatcher* w) {
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher == w) {
    watcher = nullptr;
    set_watched();
  }
}

void node_released(int64_t token) {
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher != nullptr)
    watcher->on_node_released(token);
}

void watch_gemms_for(TraceRecorder* recorder) {
  register_callbacks();
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (std::find(gemm_traces.begin(), gemm_traces.end(), recorder) == gemm_traces.end())
    gemm_traces.push_back(recorder);
  set_watched();
}

void unwatch_gemms_for(TraceRecorder* recorder) {
  std::lock_guard<std::mutex> lock(watcher_mutex);
  gemm_traces.erase(
      std::remove(gemm_traces.begin(), gemm_traces.end(), recorder), gemm_traces.end());
  set_watched();
}

}  // namespace oomguard::memory
