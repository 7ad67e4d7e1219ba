#include <oomguard/memory/modelled_meter.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <mutex>
#include <optional>
#include <stdexcept>

#include <ATen/SequenceNumber.h>
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/csrc/autograd/function.h>

#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/memory/trace_recorder.h>
#include "harness/memory/operator_callbacks.h"

namespace oomguard::memory {
namespace {

// The meter that watches operators, behind a mutex a running callback holds while it uses the
// meter, so a meter being destroyed waits for it. RecordFunction's callbacks are plain
// functions, registered once per process and never removed (removing one is only safe while
// no other code runs); with no meter they return at once.
std::mutex watcher_mutex;
ModelledMeter* watcher = nullptr;         // guarded by watcher_mutex
std::vector<TraceRecorder*> gemm_traces;  // guarded by watcher_mutex
std::atomic<bool> watched{false};         // either is set: the callbacks' fast path
// Autograd nodes this thread is inside: a GEMM there is the backward's.
thread_local int backward_depth = 0;
// Scaled-dot-product attention calls this thread is inside (the outermost is modelled).
thread_local int attention_depth = 0;

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

constexpr const char* kAttention = "aten::scaled_dot_product_attention";

sim::AttentionDtype attention_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return sim::AttentionDtype::kFloat;
    case c10::ScalarType::Half:
      return sim::AttentionDtype::kHalf;
    case c10::ScalarType::BFloat16:
      return sim::AttentionDtype::kBFloat16;
    default:
      return sim::AttentionDtype::kOther;
  }
}

// The call as aten::scaled_dot_product_attention's schema gives it: query, key, value,
// attn_mask, dropout_p, is_causal, ... Null when the arguments are not as expected.
std::optional<sim::AttentionCall> attention_call(c10::ArrayRef<const c10::IValue> inputs) {
  if (inputs.size() < 5 || !inputs[0].isTensor() || !inputs[1].isTensor() ||
      !inputs[2].isTensor() || !inputs[4].isDouble())
    return std::nullopt;
  const at::Tensor& q = inputs[0].toTensor();
  const at::Tensor& k = inputs[1].toTensor();
  const at::Tensor& v = inputs[2].toTensor();
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2 || q.is_nested())
    return std::nullopt;
  sim::AttentionCall call;
  call.query_length = q.size(-2);
  call.head_dim = q.size(-1);
  call.key_length = k.size(-2);
  call.value_dim = v.size(-1);
  call.heads = q.dim() >= 3 ? q.size(-3) : 1;
  call.batch = 1;
  for (int64_t d = 0; d < q.dim() - 3; ++d)
    call.batch *= q.size(d);
  call.dtype = attention_dtype(q.scalar_type());
  call.mask = inputs[3].isTensor();
  call.dropout = inputs[4].toDouble() > 0.0;
  call.needs_grad =
      c10::GradMode::is_enabled() && (q.requires_grad() || k.requires_grad() || v.requires_grad());
  return call;
}

// An autograd node by the thread that made it and its sequence number (numbered per thread).
ModelledMeter::NodeKey node_key(uint64_t thread, int64_t sequence_number) {
  return {thread, static_cast<uint64_t>(sequence_number)};
}

// Autograd nodes' backward, without their inputs: recording them would keep each incoming
// gradient referenced while the node runs, so AccumulateGrad would copy a gradient it steals
// otherwise, an allocation the run without oomguard does not make.
std::unique_ptr<at::ObserverContext> on_node_start(const at::RecordFunction& fn) {
  ++backward_depth;
  if (watched.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      watcher->on_backward_node(node_key(fn.forwardThreadId(), fn.seqNr()), /*start=*/true);
  }
  return nullptr;
}

void on_node_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (backward_depth > 0)
    --backward_depth;
  if (watched.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      watcher->on_backward_node(node_key(fn.forwardThreadId(), fn.seqNr()), /*start=*/false);
  }
}

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  if (!watched.load(std::memory_order_acquire))
    return nullptr;
  const char* name = fn.name();
  if (std::strcmp(name, kAttention) == 0) {
    if (attention_depth++ > 0)
      return nullptr;
    const std::optional<sim::AttentionCall> call = attention_call(fn.inputs());
    std::vector<int64_t> inputs;  // the storages of q, k and v, as the tracker numbered them
    if (call)
      for (size_t i = 0; i < 3; ++i) {
        const at::Tensor& t = fn.inputs()[i].toTensor();
        if (t.has_storage())
          inputs.push_back(TrackingAllocator::allocation_id(t.storage().data_ptr()));
      }
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr && call)
      watcher->on_attention_start(*call, inputs);
  } else if (attention_depth > 0) {
    const bool math = std::strcmp(name, "aten::_scaled_dot_product_attention_math") == 0;
    if (!math && std::strcmp(name, "aten::_scaled_dot_product_flash_attention_for_cpu") != 0)
      return nullptr;
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      watcher->on_attention_cpu_kernel(math);
  }
  return nullptr;
}

// At the GEMM's end: on CUDA the handle, and its workspace, is taken inside the kernel's
// launch, after the output (and any contiguous copies of the inputs) exist.
void on_op_end(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!watched.load(std::memory_order_acquire))
    return;
  const char* name = fn.name();
  if (std::strcmp(name, kAttention) == 0) {
    if (attention_depth == 0 || --attention_depth > 0)
      return;
    const std::vector<c10::IValue>& outputs = fn.outputs();
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      watcher->on_attention_end(
          !outputs.empty() && outputs[0].isTensor() ? outputs[0].toTensor() : at::Tensor());
    return;
  }
  if (!is_gemm(name))
    return;
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher != nullptr)
    watcher->on_gemm(backward_depth > 0);
  for (TraceRecorder* trace : gemm_traces)
    trace->on_gemm(backward_depth > 0);
}

void register_callbacks() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Operators with their arguments (an attention call's shapes) and results.
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
  watched.store(watcher != nullptr || !gemm_traces.empty(), std::memory_order_release);
}

// Frees the saved blocks of `token` in the watching meter: run when the attention's autograd
// node has run its backward, or is destroyed without one.
void release_attention(int64_t token) {
  std::lock_guard<std::mutex> lock(watcher_mutex);
  if (watcher != nullptr)
    watcher->release_attention(token);
}

// Frees what the card's kernel kept when the attention's autograd node is destroyed (its
// graph released), in case its backward never ran.
class ReleaseAttention final : public torch::autograd::FunctionPostHook {
 public:
  explicit ReleaseAttention(int64_t token) : token_(token) {}
  ~ReleaseAttention() override { release_attention(token_); }
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list&) override {
    return outputs;
  }

 private:
  int64_t token_;
};

// The attention call, or its backward, this thread is inside: what the CPU kernel allocates
// is held back from the targets the rule replaces it for.
struct AttentionCapture {
  uint64_t meter = 0;  // the serial of the meter it is for; 0 outside a call
  int64_t token = 0;   // the backward's call; 0 in a forward
  sim::AttentionCall call;
  uint64_t first_node = 0;  // the sequence number of the call's first autograd node
  bool cpu_math = false;
  std::vector<std::optional<sim::AttentionPlan>> plans;  // per target; none: fed as is
  std::vector<bool> held;                                // per target: held back
  std::vector<std::pair<int64_t, int64_t>> live;         // held back and still live: id, bytes
  int64_t held_back_bytes = 0;                           // all held back, freed or not
  std::vector<std::pair<size_t, int64_t>> deferred;      // frees held to the end: target, id
  std::vector<int64_t> inputs;                           // q's, k's and v's storages
};
thread_local AttentionCapture capture;

// Serials of meters and ids of what only the card allocates, process-wide: a stale capture
// or a hook outliving its meter never matches another meter's.
std::atomic<uint64_t> last_meter_serial{0};
std::atomic<int64_t> last_synthetic_id{0};
int64_t synthetic_id() {
  return -(last_synthetic_id.fetch_add(1, std::memory_order_relaxed) + 1);
}

// The autograd nodes the call made: reachable from its output's node and created since the
// call began (an AccumulateGrad, numbered last of all, is the inputs').
std::vector<ModelledMeter::NodeKey> attention_nodes(const at::Tensor& output, uint64_t first) {
  std::vector<ModelledMeter::NodeKey> nodes;
  std::vector<torch::autograd::Node*> stack{output.grad_fn().get()};
  std::vector<torch::autograd::Node*> seen;
  while (!stack.empty()) {
    torch::autograd::Node* node = stack.back();
    stack.pop_back();
    if (node == nullptr || std::find(seen.begin(), seen.end(), node) != seen.end())
      continue;
    seen.push_back(node);
    const uint64_t number = node->sequence_nr();
    if (number < first || number == UINT64_MAX)
      continue;
    nodes.emplace_back(node->thread_id(), number);
    for (const torch::autograd::Edge& edge : node->next_edges())
      stack.push_back(edge.function.get());
  }
  return nodes;
}

}  // namespace

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
  int64_t attention_calls = 0, attention_kept = 0, attention_left_out = 0;
  std::string attention_why;  // the last call's kernel and why
};

std::string ModelTarget::label() const {
  std::string text = !card.empty()        ? card
                     : capacity_bytes > 0 ? format_size(capacity_bytes)
                                          : std::string("no limit");
  return alloc_conf.empty() ? text : text + " " + alloc_conf;
}

ModelTarget model_target(
    const std::string& card,
    int64_t capacity_bytes,
    const std::string& alloc_conf,
    sim::TorchVersion torch,
    const sim::GpuRules& rules) {
  ModelTarget t;
  t.card = card;
  t.alloc_conf = alloc_conf;
  t.sm = kDefaultModelSm;
  t.torch = torch;
  if (!card.empty()) {
    const CardProfile& profile = find_card(card);
    t.capacity_bytes = capacity_bytes > 0 ? capacity_bytes : profile.capacity_bytes();
    t.device = sim::DeviceLimits::card(profile.total_bytes, profile.capacity_bytes());
    t.sm = profile.compute_capability;
  } else if (capacity_bytes > 0) {
    t.capacity_bytes = capacity_bytes;
    t.device = sim::DeviceLimits::card(capacity_bytes, capacity_bytes);
  }
  t.settings = sim::AllocatorSettings::parse(alloc_conf, torch.number());
  t.workspace = sim::cublas_workspace_rule(t.sm, torch, rules);
  t.attention = rules.sdpa_attention;
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
    : tracker_(tracker), serial_(last_meter_serial.fetch_add(1) + 1) {
  if (targets.empty())
    throw std::invalid_argument("an allocator model needs a card or capacity to predict for");
  bool watches = false;
  for (size_t i = 0; i < targets.size(); ++i) {
    models_.push_back(std::make_unique<Model>(targets[i], /*refuses=*/i == 0));
    watches = watches || targets[i].workspace.bytes_per_handle > 0 || targets[i].attention;
  }
  if (watches) {
    register_callbacks();
    std::lock_guard<std::mutex> lock(watcher_mutex);
    if (watcher != nullptr)
      throw std::logic_error("another allocator model already watches operators");
    watcher = this;
    set_watched();
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
  if (watcher == this) {
    watcher = nullptr;
    set_watched();
  }
  if (capture.meter == serial_)
    capture = AttentionCapture{};
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
  m.blocks.emplace(id, h);
  return true;
}

bool ModelledMeter::serve_in_callback(Model& m, int64_t id, int64_t bytes) {
  if (serve(m, id, bytes))
    return true;
  if (m.refuses && pending_oom_.empty())  // raised by the run's next allocation
    pending_oom_ = m.allocator.last_oom()->message;
  return false;
}

void ModelledMeter::release(Model& m, int64_t id) {
  const auto it = m.blocks.find(id);
  if (it == m.blocks.end())
    return;
  m.allocator.free(it->second);
  m.blocks.erase(it);
}

void ModelledMeter::on_gemm(bool inside_backward) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_) {
    bool& taken = m->workspace_taken[inside_backward ? 1 : 0];
    if (taken || m->target.workspace.bytes_per_handle <= 0)
      continue;
    // Kept for the life of the process, as the handle pool keeps it: never freed. Refused, it
    // is asked for again at the next GEMM, as PyTorch keeps only a workspace it got.
    if (!serve_in_callback(*m, synthetic_id(), m->target.workspace.bytes_per_handle))
      continue;
    taken = true;
    ++m->workspaces;
  }
}

void ModelledMeter::on_attention_start(
    const sim::AttentionCall& call, const std::vector<int64_t>& inputs) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture.meter == serial_ && capture.token != 0)
    end_attention_backward();  // a forward inside a backward window: the window is over
  capture = AttentionCapture{};
  capture.meter = serial_;
  capture.call = call;
  capture.inputs = inputs;
  capture.first_node = at::sequence_number::peek();
  for (const auto& m : models_) {
    if (m->target.attention)
      capture.plans.push_back(sim::cuda_attention(call, m->target.sm, m->target.torch));
    else
      capture.plans.emplace_back();
    capture.held.push_back(capture.plans.back().has_value());
  }
}

void ModelledMeter::on_attention_cpu_kernel(bool math) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_attention_call())
    return;
  capture.cpu_math = math;
  if (!math)
    return;
  // The math path on both: what the CPU allocates is what the card would (the dropout mask
  // aside: fp32 here, bool there).
  for (size_t i = 0; i < models_.size(); ++i) {
    std::optional<sim::AttentionPlan>& plan = capture.plans[i];
    if (plan && plan->kernel == sim::AttentionKernel::kMath) {
      Model& m = *models_[i];
      ++m.attention_calls;
      m.attention_why = plan->why + ", as the CPU ran it";
      plan.reset();
      capture.held[i] = false;
    }
  }
}

void ModelledMeter::on_attention_end(const at::Tensor& output) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!in_attention_call())
    return;
  AttentionCapture call = std::move(capture);
  capture = AttentionCapture{};
  // The CPU kernel's output is the card's too (same shape and dtype); the rest it allocated is
  // replaced by what the card's kernel keeps.
  const int64_t output_id = output.defined() && output.has_storage()
                                ? TrackingAllocator::allocation_id(output.storage().data_ptr())
                                : 0;
  int64_t output_bytes = 0;
  for (const auto& [id, bytes] : call.live)
    if (id == output_id)
      output_bytes = bytes;
  const bool hook = call.call.needs_grad && output.defined() && output.grad_fn() != nullptr;
  const int64_t token = synthetic_id();  // process-wide: a hook outliving this meter finds none
  AttentionBackward backward;
  backward.held.assign(models_.size(), false);
  backward.transient.resize(models_.size());
  std::vector<std::pair<size_t, int64_t>> kept;  // target, synthetic id
  for (size_t i = 0; i < models_.size(); ++i) {
    if (!call.plans[i])
      continue;
    const sim::AttentionPlan& plan = *call.plans[i];
    Model& m = *models_[i];
    if (output_bytes > 0)
      serve_in_callback(m, output_id, output_bytes);
    for (const int64_t bytes : plan.transient) {
      const int64_t id = synthetic_id();
      if (serve_in_callback(m, id, bytes))
        release(m, id);
    }
    int64_t saved = 0;
    for (const int64_t bytes : plan.saved) {
      const int64_t id = synthetic_id();
      if (serve_in_callback(m, id, bytes))
        kept.emplace_back(i, id);
      saved += bytes;
    }
    backward.held[i] = true;
    backward.transient[i] = plan.backward_transient;
    ++m.attention_calls;
    m.attention_kept += saved;
    m.attention_left_out += call.held_back_bytes - output_bytes;
    m.attention_why =
        plan.why + " in place of the CPU's " + (call.cpu_math ? "math path" : "flash kernel");
  }
  if (!hook) {  // nothing kept for a backward: freed as the call returns
    for (const auto& [i, id] : kept)
      release(*models_[i], id);
    return;
  }
  if (std::find(backward.held.begin(), backward.held.end(), true) == backward.held.end())
    return;  // the math path on both: the CPU's backward is the card's
  // Its backward: from the first of the call's nodes to run to the last, what the CPU
  // allocates is held back, and the card's kernel's backward allocates instead.
  backward.kept = std::move(kept);
  for (const NodeKey& node : attention_nodes(output, call.first_node)) {
    attention_node_[node] = token;
    ++backward.nodes;
  }
  // A fused kernel keeps q, k, v and its output for its backward; the CPU's math path kept
  // copies, and these may be freed before the backward: their frees wait for its end.
  if (call.cpu_math) {
    for (const int64_t id : call.inputs)
      if (id > 0)
        attention_pinned_.emplace(id, token);
    if (output_id > 0)
      attention_pinned_.emplace(output_id, token);
  }
  attention_backward_[token] = std::move(backward);
  output.grad_fn()->add_post_hook(std::make_unique<ReleaseAttention>(token));
}

void ModelledMeter::on_backward_node(const NodeKey& node, bool start) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = attention_node_.find(node);
  const int64_t token = found == attention_node_.end() ? 0 : found->second;
  const bool inside = capture.meter == serial_ && capture.token != 0;
  if (start) {
    if (inside && capture.token != token)
      end_attention_backward();  // another node: the call's backward is over
    if (token == 0 || (capture.meter == serial_ && capture.token == token))
      return;
    if (capture.meter == serial_)
      return;  // inside a forward call (a backward within it): left as it is
    const AttentionBackward& backward = attention_backward_.at(token);
    capture = AttentionCapture{};
    capture.meter = serial_;
    capture.token = token;
    capture.held = backward.held;
    return;
  }
  if (token == 0)
    return;
  attention_node_.erase(found);
  AttentionBackward& backward = attention_backward_.at(token);
  if (--backward.nodes == 0 && inside && capture.token == token)
    end_attention_backward();
}

bool ModelledMeter::in_attention_call() const {
  return capture.meter == serial_ && capture.token == 0 && capture.plans.size() == models_.size();
}

void ModelledMeter::end_attention_backward() {
  AttentionCapture call = std::move(capture);
  capture = AttentionCapture{};
  const auto it = attention_backward_.find(call.token);
  for (size_t i = 0; i < models_.size() && i < call.held.size(); ++i) {
    if (!call.held[i])
      continue;
    Model& m = *models_[i];
    // The card's kernel's temporaries (when the call is still known), then the gradients the
    // CPU's backward left live.
    if (it != attention_backward_.end())
      for (const int64_t bytes : it->second.transient[i]) {
        const int64_t id = synthetic_id();
        if (serve_in_callback(m, id, bytes))
          release(m, id);
      }
    int64_t fed = 0;
    for (const auto& [id, bytes] : call.live) {
      serve_in_callback(m, id, bytes);
      fed += bytes;
    }
    m.attention_left_out += call.held_back_bytes - fed;
  }
  for (const auto& [i, id] : call.deferred)
    release(*models_[i], id);
  forget_attention(call.token);
}

void ModelledMeter::close_stale_capture() {
  if (capture.meter == serial_ && capture.token != 0 &&
      attention_backward_.count(capture.token) == 0)
    end_attention_backward();  // its call was forgotten (graph gone) while the window was open
}

void ModelledMeter::forget_attention(int64_t token) {
  const auto it = attention_backward_.find(token);
  if (it == attention_backward_.end())
    return;
  for (const auto& [i, id] : it->second.kept)
    release(*models_[i], id);
  for (const auto& [i, id] : it->second.deferred)
    release(*models_[i], id);
  attention_backward_.erase(it);
  for (auto node = attention_node_.begin(); node != attention_node_.end();)
    node = node->second == token ? attention_node_.erase(node) : std::next(node);
  for (auto input = attention_pinned_.begin(); input != attention_pinned_.end();)
    input = input->second == token ? attention_pinned_.erase(input) : std::next(input);
}

void ModelledMeter::release_attention(int64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  forget_attention(token);
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
  if (m.target.workspace.bytes_per_handle > 0)  // the handles that ran a GEMM so far
    f.rules.push_back({"cublas_workspace", f.workspace_bytes, m.target.workspace.describe()});
  if (m.target.attention && m.attention_calls > 0)
    f.rules.push_back(
        {"sdpa_attention",
         m.attention_kept,
         std::to_string(m.attention_calls) + " call(s): " + m.attention_why + "; kept " +
             format_size(m.attention_kept) + " for backward, left out " +
             format_size(m.attention_left_out) + " the CPU kernel allocated"});
  return f;
}

void ModelledMeter::reset_peak() {
  tracker_.reset_peak();
  std::lock_guard<std::mutex> lock(mutex_);
  // A phase begins outside any attention call: a backward window left open (a backward that
  // stopped inside it) ends here, and a refusal not yet raised belongs to the phase that ended
  // (its prediction says so).
  if (capture.meter == serial_ && capture.token != 0)
    end_attention_backward();
  pending_oom_.clear();
  for (auto& m : models_) {
    m->allocator.reset_peak();
    m->retries_at_reset = m->allocator.stats().num_alloc_retries;
    m->largest_gap = 0;
    // A target that ran out before stays out: its figures since then are not the card's.
    m->oom = m->first_oom.empty() ? "" : "ran out of memory earlier: " + m->first_oom;
    m->attention_calls = m->attention_kept = m->attention_left_out = 0;
  }
}

void ModelledMeter::set_capacity(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  models_.front()->allocator.set_allowed_bytes(bytes);
}

void ModelledMeter::forget_refusals() {
  std::lock_guard<std::mutex> lock(mutex_);
  pending_oom_.clear();
  for (auto& m : models_) {
    m->oom.clear();
    m->first_oom.clear();
  }
}

void ModelledMeter::release_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& m : models_)
    m->allocator.empty_cache();
}

void ModelledMeter::on_alloc(int64_t id, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Model& own = *models_.front();
  if (!pending_oom_.empty()) {  // a workspace or kept tensor the card had no room for
    const std::string message = std::move(pending_oom_);
    pending_oom_.clear();
    TORCH_CHECK_WITH(OutOfMemoryError, false, message);
  }
  close_stale_capture();
  const bool capturing = capture.meter == serial_ && capture.held.size() == models_.size();
  if (capturing) {  // inside an attention call: held back from the targets it replaces
    capture.live.emplace_back(id, bytes);
    capture.held_back_bytes += bytes;
  }
  const auto fed = [&](size_t i) { return !capturing || !capture.held[i]; };
  if (fed(0) && !serve(own, id, bytes)) {
    if (capturing) {
      capture.live.pop_back();
      capture.held_back_bytes -= bytes;
    }
    // The caching allocator's own words, so the report and handlers treat it as a real OOM.
    TORCH_CHECK_WITH(OutOfMemoryError, false, own.allocator.last_oom()->message);
  }
  for (size_t i = 1; i < models_.size(); ++i)
    if (fed(i))
      serve(*models_[i], id, bytes);
}

void ModelledMeter::on_free(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  close_stale_capture();
  const bool capturing = capture.meter == serial_ && capture.held.size() == models_.size();
  bool held_back = false;
  if (capturing) {
    auto& live = capture.live;
    for (auto it = live.begin(); it != live.end(); ++it)
      if (it->first == id) {
        live.erase(it);
        held_back = true;
        break;
      }
  }
  AttentionBackward* pinned = nullptr;  // the call whose kernel keeps this input
  if (const auto it = attention_pinned_.find(id); it != attention_pinned_.end()) {
    const auto call = attention_backward_.find(it->second);
    pinned = call == attention_backward_.end() ? nullptr : &call->second;
    attention_pinned_.erase(it);
  }
  for (size_t i = 0; i < models_.size(); ++i) {
    // In a replaced backward, what the CPU's nodes free as they go (the inputs they kept) the
    // card's single kernel frees after it has run: at the window's end.
    if (capturing && capture.token != 0 && capture.held[i] && !held_back)
      capture.deferred.emplace_back(i, id);
    else if (pinned != nullptr && pinned->held[i])
      pinned->deferred.emplace_back(i, id);
    else
      release(*models_[i], id);
  }
}

}  // namespace oomguard::memory
