#include <oomguard/memory/modelled_meter.h>

#include <stdexcept>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include "harness/memory/operator_callbacks.h"
#include "harness/memory/rules/gpu_rule.h"

namespace oomguard::memory {
namespace {

// One target: its allocator model and what it saw since the last reset_peak.
struct Model {
  Model(const ModelTarget& t, bool refuses)
      : target(t), allocator(t.settings, t.device), refuses(refuses) {
    if (t.capacity_bytes > 0)
      allocator.set_allowed_bytes(t.capacity_bytes);
  }
  ModelTarget target;
  sim::CachingAllocator allocator;
  bool refuses;  // the meter's own target: a refusal throws
  std::unordered_map<int64_t, sim::CachingAllocator::Handle> blocks;
  // A target that does not stop the run: its first refusal. The run went on with what it
  // refused, so this model no longer follows it; a card's run would have ended there.
  std::string first_oom;
  // Since the last reset_peak:
  int64_t retries_at_reset = 0;
  int64_t largest_gap = 0;
  std::string oom;
};

// Serves `bytes` in `m` under `id`; false when refused (recorded as the model's OOM).
bool serve(Model& m, int64_t id, int64_t bytes) {
  const sim::CachingAllocator::Handle h = m.allocator.malloc(bytes);
  const sim::AllocatorStats& s = m.allocator.stats();
  const int64_t gap = s.reserved_bytes.current - s.allocated_bytes.current;
  if (gap > m.largest_gap)
    m.largest_gap = gap;
  if (h == sim::CachingAllocator::kOom) {
    if (m.oom.empty())
      m.oom = m.allocator.last_oom()->message;
    if (!m.refuses && m.first_oom.empty())  // the run goes on without what it refused
      m.first_oom = m.oom;
    return false;
  }
  m.blocks.emplace(id, h);
  return true;
}

ModelTarget single_target(
    const sim::AllocatorSettings& settings, const sim::DeviceLimits& device, int64_t workspace) {
  ModelTarget t;
  t.settings = settings;
  t.device = device;
  t.workspace.bytes_per_handle = workspace;
  t.workspace.handles = sim::kTrainingCublasHandles;
  t.workspace.why = "as given";
  return t;
}

}  // namespace

class ModelledMeter::Models final : public RuleModels {
 public:
  explicit Models(const std::vector<ModelTarget>& targets) {
    for (size_t i = 0; i < targets.size(); ++i)
      all.push_back(std::make_unique<Model>(targets[i], /*refuses=*/i == 0));
  }
  size_t size() const override { return all.size(); }
  const ModelTarget& target(size_t i) const override { return all.at(i)->target; }
  bool serve(size_t i, int64_t id, int64_t bytes) override {
    Model& m = *all.at(i);
    if (memory::serve(m, id, bytes))
      return true;
    if (m.refuses && pending_oom.empty())  // raised by the run's next allocation
      pending_oom = m.allocator.last_oom()->message;
    return false;
  }
  void release(size_t i, int64_t id) override {
    Model& m = *all.at(i);
    const auto it = m.blocks.find(id);
    if (it == m.blocks.end())
      return;
    m.allocator.free(it->second);
    m.blocks.erase(it);
  }

  std::vector<std::unique_ptr<Model>> all;
  std::string pending_oom;  // the first target's refusal in a rule's callback
};

class ModelledMeter::Watcher final : public OperatorWatcher {
 public:
  explicit Watcher(ModelledMeter& meter) : meter_(meter) {}
  void on_operator_start(const at::RecordFunction& fn) override {
    for_rules_hearing(fn.name(), [&](GpuRule& rule) { rule.on_operator_start(fn); });
  }
  void on_operator_end(const at::RecordFunction& fn, bool inside_backward) override {
    for_rules_hearing(fn.name(), [&](GpuRule& rule) { rule.on_operator_end(fn, inside_backward); });
  }
  void on_backward_node(const NodeKey& node, bool start) override {
    std::lock_guard<std::mutex> lock(meter_.mutex_);
    for (auto& rule : meter_.rules_)
      rule->on_backward_node(node, start);
  }
  void on_node_released(int64_t token) override {
    std::lock_guard<std::mutex> lock(meter_.mutex_);
    for (auto& rule : meter_.rules_)
      rule->on_node_released(token);
  }

 private:
  // Most operators concern no rule: those pass without the meter's mutex.
  template <typename Call>
  void for_rules_hearing(const char* name, const Call& call) {
    for (auto& rule : meter_.rules_)
      if (rule->hears(name)) {
        std::lock_guard<std::mutex> lock(meter_.mutex_);
        call(*rule);
      }
  }
  ModelledMeter& meter_;
};

ModelledMeter::ModelledMeter(TrackingAllocator& tracker, const std::vector<ModelTarget>& targets)
    : tracker_(tracker), models_(std::make_unique<Models>(targets)) {
  if (targets.empty())
    throw std::invalid_argument("an allocator model needs a card or capacity to predict for");
  rules_ = make_rules(*models_);
  held_.resize(targets.size());
  taken_.resize(targets.size());
  if (!rules_.empty()) {
    watcher_ = std::make_unique<Watcher>(*this);
    watch_operators(watcher_.get());
  }
  tracker_.add_observer(this);  // last: nothing after it throws
}

ModelledMeter::ModelledMeter(
    TrackingAllocator& tracker,
    const sim::AllocatorSettings& settings,
    const sim::DeviceLimits& device,
    int64_t workspace_bytes)
    : ModelledMeter(tracker, {single_target(settings, device, workspace_bytes)}) {}

ModelledMeter::~ModelledMeter() {
  tracker_.remove_observer(this);
  if (watcher_ != nullptr)
    unwatch_operators(watcher_.get());  // waits for a callback using this meter
}

size_t ModelledMeter::targets() const {
  return models_->size();
}

const ModelTarget& ModelledMeter::target(size_t i) const {
  return models_->target(i);
}

bool ModelledMeter::workspace_taken(bool backward) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& rule : rules_) {
    const Workspaces w = workspaces(*rule, 0);
    if (backward ? w.backward : w.forward)
      return true;
  }
  return false;
}

int64_t ModelledMeter::workspace_bytes_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t bytes = 0;
  for (const auto& rule : rules_)
    bytes += workspaces(*rule, 0).bytes;
  return bytes;
}

MemoryStats ModelledMeter::stats() const {
  MemoryStats s = tracker_.stats();
  std::lock_guard<std::mutex> lock(mutex_);
  const sim::AllocatorStats& m = models_->all.front()->allocator.stats();
  s.reserved_bytes = m.reserved_bytes.current;
  s.peak_reserved_bytes = m.reserved_bytes.peak;
  s.num_alloc_retries = m.num_alloc_retries;
  s.num_ooms = m.num_ooms;
  s.predicted_allocated_bytes = m.allocated_bytes.current;
  s.predicted_peak_allocated_bytes = m.allocated_bytes.peak;
  return s;
}

ModelFigures ModelledMeter::figures(size_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Model& m = *models_->all.at(i);
  const sim::AllocatorStats& s = m.allocator.stats();
  ModelFigures f;
  f.peak_allocated_bytes = s.allocated_bytes.peak;
  f.peak_reserved_bytes = s.reserved_bytes.peak;
  f.num_alloc_retries = s.num_alloc_retries - m.retries_at_reset;
  f.largest_gap_bytes = m.largest_gap;
  f.oom = m.oom;
  for (const auto& rule : rules_) {
    f.workspace_bytes += workspaces(*rule, i).bytes;
    if (std::optional<sim::RuleEffect> effect = rule->effect(i))
      f.rules.push_back(std::move(*effect));
  }
  return f;
}

void ModelledMeter::reset_peak() {
  tracker_.reset_peak();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& rule : rules_)
    rule->on_phase_start();
  // A refusal not yet raised belongs to the phase that ended (its prediction says so).
  models_->pending_oom.clear();
  for (auto& m : models_->all) {
    m->allocator.reset_peak();
    m->retries_at_reset = m->allocator.stats().num_alloc_retries;
    m->largest_gap = 0;
    // A target that ran out before stays out: its figures since then are not the card's.
    m->oom = m->first_oom.empty() ? "" : "ran out of memory earlier: " + m->first_oom;
  }
}

void ModelledMeter::set_capacity(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  models_->all.front()->allocator.set_allowed_bytes(bytes);
}

void ModelledMeter::forget_refusals() {
  std::lock_guard<std::mutex> lock(mutex_);
  models_->pending_oom.clear();
  for (auto& m : models_->all) {
    m->oom.clear();
    m->first_oom.clear();
  }
}

void ModelledMeter::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_->all)
    m->allocator.empty_cache();
}

void ModelledMeter::on_alloc(int64_t id, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!models_->pending_oom.empty()) {  // a workspace or kept tensor the card had no room for
    const std::string message = std::move(models_->pending_oom);
    models_->pending_oom.clear();
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
  held_.assign(held_.size(), false);
  for (auto& rule : rules_)
    rule->hold_back(held_);
  Model& own = *models_->all.front();
  if (!held_[0] && !serve(own, id, bytes))
    // The caching allocator's own words, so the report and handlers treat it as a real OOM.
    TORCH_CHECK_WITH(OutOfMemoryError, false, own.allocator.last_oom()->message);
  try {
    for (auto& rule : rules_)
      rule->on_alloc(id, bytes);
  } catch (...) {  // the allocation fails: no free will come for it
    models_->release(0, id);
    throw;
  }
  for (size_t i = 1; i < models_->size(); ++i)
    if (!held_[i])
      serve(*models_->all[i], id, bytes);
}

void ModelledMeter::on_free(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  taken_.assign(taken_.size(), false);
  for (auto& rule : rules_)
    rule->on_free(id, taken_);
  for (size_t i = 0; i < models_->size(); ++i)
    if (!taken_[i])
      models_->release(i, id);
}

}  // namespace oomguard::memory
