#include <oomguard/memory/modelled_meter.h>

#include <atomic>
#include <cstring>
#include <stdexcept>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

namespace oomguard::memory {
namespace {

// The meter that watches GEMMs; RecordFunction's callbacks are plain functions.
std::atomic<ModelledMeter*> gemm_watcher{nullptr};
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
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION) {
    ++backward_depth;
  } else if (ModelledMeter* meter = gemm_watcher.load(); meter && is_gemm(fn.name())) {
    meter->on_gemm(backward_depth > 0);
  }
  return nullptr;
}

void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (fn.scope() == at::RecordScope::BACKWARD_FUNCTION && backward_depth > 0)
    --backward_depth;
}

}  // namespace

ModelledMeter::ModelledMeter(
    TrackingAllocator& tracker,
    const sim::AllocatorSettings& settings,
    const sim::DeviceLimits& device,
    int64_t workspace_bytes)
    : tracker_(tracker), model_(settings, device), workspace_bytes_(workspace_bytes) {
  if (workspace_bytes_ > 0) {
    ModelledMeter* none = nullptr;
    if (!gemm_watcher.compare_exchange_strong(none, this))
      throw std::logic_error("another allocator model already adds cuBLAS workspaces");
    gemm_callback_ = at::addGlobalCallback(
        at::RecordFunctionCallback(on_op_start, on_op_end)
            .needsInputs(false)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  }
  tracker_.add_observer(this);
}

ModelledMeter::~ModelledMeter() {
  tracker_.remove_observer(this);
  if (gemm_callback_ != 0) {
    at::removeCallback(gemm_callback_);
    gemm_watcher.store(nullptr);
  }
}

void ModelledMeter::on_gemm(bool inside_backward) {
  std::lock_guard<std::mutex> lock(mutex_);
  bool& taken = workspace_taken_[inside_backward ? 1 : 0];
  if (taken)
    return;
  taken = true;
  // Kept for the life of the process, as the handle pool keeps it: never freed.
  if (model_.malloc(workspace_bytes_) == sim::CachingAllocator::kOom) {
    pending_oom_ = model_.last_oom()->message;
    return;
  }
  ++workspaces_allocated_;
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
