#include <oomguard/memory/modelled_meter.h>

#include <c10/util/Exception.h>

namespace oomguard::memory {

ModelledMeter::ModelledMeter(
    TrackingAllocator& tracker,
    const sim::AllocatorSettings& settings,
    const sim::DeviceLimits& device)
    : tracker_(tracker), model_(settings, device) {
  tracker_.add_observer(this);
}

ModelledMeter::~ModelledMeter() {
  tracker_.remove_observer(this);
}

MemoryStats ModelledMeter::stats() const {
  MemoryStats s = tracker_.stats();
  std::lock_guard<std::mutex> lock(mutex_);
  const sim::AllocatorStats& m = model_.stats();
  s.reserved_bytes = m.reserved_bytes.current;
  s.peak_reserved_bytes = m.reserved_bytes.peak;
  s.num_alloc_retries = m.num_alloc_retries;
  s.num_ooms = m.num_ooms;
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
