#include <oomguard/memory/modelled_meter.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>

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

struct ModelledMeter::Model {
  Model(const ModelTarget& t, bool refuses)
      : target(t), allocator(t.settings, t.device), refuses(refuses) {
    if (t.capacity_bytes > 0)
      allocator.set_allowed_bytes(t.capacity_bytes);
  }
  ModelTarget target;
  sim::CachingAllocator allocator;
  bool refuses;  // the meter's own target: a refusal throws
  std::unordered_map<int64_t, sim::CachingAllocator::Handle> blocks;
  bool workspace_taken[2] = {false, false};  // forward's, backward's
  int64_t workspaces = 0;
  // A target that does not stop the run: its first refusal. The run went on with what it
  // refused, so this model no longer follows it; a card's run would have ended there.
  std::string first_oom;
  // Since the last reset_peak:
  int64_t retries_at_reset = 0;
  int64_t largest_gap = 0;
  std::string oom;
};

std::string ModelTarget::label() const {
  std::string text = !card.empty()        ? card
                     : capacity_bytes > 0 ? format_size(capacity_bytes)
                                          : std::string("no limit");
  return alloc_conf.empty() ? text : text + " " + alloc_conf;
}

std::vector<sim::RuleEffect> ModelTarget::rules() const {
  std::vector<sim::RuleEffect> effects;
  if (workspace.bytes_per_handle > 0)
    effects.push_back({"cublas_workspace", workspace.bytes(), workspace.describe()});
  return effects;
}

ModelTarget model_target(
    const std::string& card,
    int64_t capacity_bytes,
    const std::string& alloc_conf,
    sim::TorchVersion torch,
    std::string_view cublas_config,
    const sim::GpuRules& rules) {
  ModelTarget t;
  t.card = card;
  t.alloc_conf = alloc_conf;
  int sm = kDefaultModelSm;
  if (!card.empty()) {
    const CardProfile& profile = find_card(card);
    t.capacity_bytes = capacity_bytes > 0 ? capacity_bytes : profile.capacity_bytes();
    t.device = {profile.total_bytes, profile.capacity_bytes(), 0};
    sm = profile.compute_capability;
  } else if (capacity_bytes > 0) {
    t.capacity_bytes = capacity_bytes;
    t.device = {capacity_bytes, capacity_bytes, 0};
  }
  t.settings = sim::AllocatorSettings::parse(alloc_conf, torch.number());
  if (rules.cublas_workspace)
    t.workspace = sim::cublas_workspace(sm, torch, cublas_config, sim::kTrainingCublasHandles);
  return t;
}

namespace {

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

ModelledMeter::ModelledMeter(TrackingAllocator& tracker, const std::vector<ModelTarget>& targets)
    : tracker_(tracker) {
  if (targets.empty())
    throw std::invalid_argument("an allocator model needs a card or capacity to predict for");
  bool workspaces = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    models_.push_back(std::make_unique<Model>(targets[i], /*refuses=*/i == 0));
    workspaces = workspaces || targets[i].workspace.bytes_per_handle > 0;
  }
  if (workspaces) {
    register_gemm_callbacks();
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (gemm_watcher != nullptr)
      throw std::logic_error("another allocator model already adds cuBLAS workspaces");
    gemm_watcher = this;
    gemm_watched.store(true, std::memory_order_release);
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
  std::lock_guard<std::mutex> lock(watcher_mutex);  // waits for a callback using this meter
  if (gemm_watcher == this) {
    gemm_watcher = nullptr;
    gemm_watched.store(false, std::memory_order_release);
  }
}

const ModelTarget& ModelledMeter::target(size_t i) const {
  return models_.at(i)->target;
}

bool ModelledMeter::serve(Model& m, int64_t id, int64_t bytes) {
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
  if (id >= 0)
    m.blocks.emplace(id, h);
  return true;
}

void ModelledMeter::on_gemm(bool inside_backward) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_) {
    bool& taken = m->workspace_taken[inside_backward ? 1 : 0];
    if (taken || m->target.workspace.bytes_per_handle <= 0)
      continue;
    // Kept for the life of the process, as the handle pool keeps it: never freed. Refused, it
    // is asked for again at the next GEMM, as PyTorch keeps only a workspace it got.
    if (!serve(*m, /*id=*/-1, m->target.workspace.bytes_per_handle)) {
      if (m->refuses && pending_oom_.empty())
        pending_oom_ = m->allocator.last_oom()->message;
      continue;
    }
    taken = true;
    ++m->workspaces;
  }
}

bool ModelledMeter::workspace_taken(bool backward) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return models_.front()->workspace_taken[backward ? 1 : 0];
}

int64_t ModelledMeter::workspace_bytes_allocated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Model& m = *models_.front();
  return m.workspaces * m.target.workspace.bytes_per_handle;
}

MemoryStats ModelledMeter::stats() const {
  MemoryStats s = tracker_.stats();
  std::lock_guard<std::mutex> lock(mutex_);
  const sim::AllocatorStats& m = models_.front()->allocator.stats();
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
  const Model& m = *models_.at(i);
  const sim::AllocatorStats& s = m.allocator.stats();
  ModelFigures f;
  f.peak_allocated_bytes = s.allocated_bytes.peak;
  f.peak_reserved_bytes = s.reserved_bytes.peak;
  f.num_alloc_retries = s.num_alloc_retries - m.retries_at_reset;
  f.largest_gap_bytes = m.largest_gap;
  f.workspace_bytes = m.workspaces * m.target.workspace.bytes_per_handle;
  f.oom = m.oom;
  return f;
}

void ModelledMeter::reset_peak() {
  tracker_.reset_peak();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_) {
    m->allocator.reset_peak();
    m->retries_at_reset = m->allocator.stats().num_alloc_retries;
    m->largest_gap = 0;
    // A target that ran out before stays out: its figures since then are not the card's.
    m->oom = m->first_oom.empty() ? "" : "ran out of memory earlier: " + m->first_oom;
  }
}

void ModelledMeter::set_capacity(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  models_.front()->allocator.set_allowed_bytes(bytes);
}

void ModelledMeter::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_)
    m->allocator.empty_cache();
}

void ModelledMeter::on_alloc(int64_t id, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Model& own = *models_.front();
  if (!pending_oom_.empty()) {  // a workspace the card had no room for (on_gemm)
    const std::string message = std::move(pending_oom_);
    pending_oom_.clear();
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
  if (!serve(own, id, bytes)) {
    // The caching allocator's own words, so the report and handlers treat it as a real OOM.
    TORCH_CHECK_WITH(OutOfMemoryError, false, own.allocator.last_oom()->message);
  }
  for (size_t i = 1; i < models_.size(); ++i)
    serve(*models_[i], id, bytes);
}

void ModelledMeter::on_free(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_) {
    const auto it = m->blocks.find(id);
    if (it == m->blocks.end())
      continue;
    m->allocator.free(it->second);
    m->blocks.erase(it);
  }
}

}  // namespace oomguard::memory
