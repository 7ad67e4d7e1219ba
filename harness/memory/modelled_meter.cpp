#include <oomguard/memory/modelled_meter.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

namespace oomguard::memory {
namespace {

// The meter that watches GEMMs, behind a mutex a running callback holds while it uses the
// meter, so a meter being destroyed waits for it. RecordFunction's callbacks are plain
// functions, registered once per process and never removed (removing one is only safe while
// no other code runs); with no meter they return at once.
std::mutex watcher_mutex;
ModelledMeter* gemm_watcher = nullptr;  // guarded by watcher_mutex
std::atomic<bool> gemm_watched{false};  // a meter is set: the callbacks' fast path
// Autograd nodes this thread is inside: a GEMM there is the backward's.
thread_local int backward_depth = 0;

// The operators that take a cuBLAS handle on CUDA (at::cuda::getCurrentCUDABlasHandle, whose
// first use on a thread allocates the workspace): matrix products of every shape.
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

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION)
    ++backward_depth;
  return nullptr;
}

// At the GEMM's end: on CUDA the handle, and its workspace, is taken inside the kernel's
// launch, after the output (and any contiguous copies of the inputs) exist.
void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    if (backward_depth > 0)
      --backward_depth;
    return;
  }
  if (!gemm_watched.load(std::memory_order_acquire) || !is_gemm(fn.name()))
    return;
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (gemm_watcher != nullptr)
    gemm_watcher->on_gemm(backward_depth > 0);
}

void register_gemm_callbacks() {
  static std::once_flag once;
  std::call_once(once, [] {
    at::addGlobalCallback(
        at::RecordFunctionCallback(on_op_start, on_op_end)
            .needsInputs(false)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  });
}

}  // namespace

ModelledMeter::ModelledMeter(
    TrackingAllocator& tracker,
    const sim::AllocatorSettings& settings,
    const sim::DeviceLimits& device,
    int64_t workspace_bytes)
    : tracker_(tracker), model_(settings, device), workspace_bytes_(workspace_bytes) {
  if (workspace_bytes_ > 0) {
    register_gemm_callbacks();
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (gemm_watcher != nullptr)
      throw std::logic_error("another allocator model already adds cuBLAS workspaces");
    gemm_watcher = this;
    gemm_watched.store(true, std::memory_order_release);
  }
  tracker_.add_observer(this);  // last: nothing after it throws
}

ModelledMeter::~ModelledMeter() {
  tracker_.remove_observer(this);
  std::lock_guard<std::mutex> lock(watcher_mutex);  // waits for a callback using this meter
  if (gemm_watcher == this) {
    gemm_watcher = nullptr;
    gemm_watched.store(false, std::memory_order_release);
  }
}

void ModelledMeter::on_gemm(bool inside_backward) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool& taken = workspace_taken_[inside_backward ? 1 : 0];
  if (taken)
    return;
  // Kept for the life of the process, as the handle pool keeps it: never freed. Refused, it
  // is asked for again at the next GEMM, as PyTorch keeps only a workspace it got.
  if (model_.malloc(workspace_bytes_) == sim::CachingAllocator::kOom) {
    pending_oom_ = model_.last_oom()->message;
    return;
  }
  taken = true;
  ++workspaces_allocated_;
}

bool ModelledMeter::workspace_taken(bool backward) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return workspace_taken_[backward ? 1 : 0];
}

int64_t ModelledMeter::workspace_bytes_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return workspaces_allocated_ * workspace_bytes_;
}

MemoryStats ModelledMeter::stats() const {
  MemoryStats s = tracker_.stats();
  std::lock_guard<std::mutex> lock(mutex_);
  const sim::AllocatorStats& m = model_.stats();
  s.reserved_bytes = m.reserved_bytes.current;
  s.peak_reserved_bytes = m.reserved_bytes.peak;
  s.num_alloc_retries = m.num_alloc_retries;
  s.num_ooms = m.num_ooms;
  s.predicted_allocated_bytes = m.allocated_bytes.current;
  s.predicted_peak_allocated_bytes = m.allocated_bytes.peak;
  return s;
}

void ModelledMeter::reset_peak() {
  tracker_.reset_peak();
  std::lock_guard<std::mutex> lock(mutex_);
  model_.reset_peak();
}

void ModelledMeter::set_capacity(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  model_.set_allowed_bytes(bytes);
}

void ModelledMeter::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  model_.empty_cache();
}

void ModelledMeter::on_alloc(int64_t id, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!pending_oom_.empty()) {  // a workspace the card had no room for (on_gemm)
    const std::string message = std::move(pending_oom_);
    pending_oom_.clear();
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
  const sim::CachingAllocator::Handle h = model_.malloc(bytes);
  if (h == sim::CachingAllocator::kOom) {
    // The caching allocator's own words, so the report and handlers treat it as a real OOM.
    TORCH_CHECK_WITH(OutOfMemoryError, false, model_.last_oom()->message);
  }
  blocks_.emplace(id, h);
}

void ModelledMeter::on_free(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = blocks_.find(id);
  if (it == blocks_.end())
    return;
  model_.free(it->second);
  blocks_.erase(it);
}

}  // namespace oomguard::memory
