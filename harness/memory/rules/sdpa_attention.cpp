// The sdpa_attention rule (sim::cuda_attention): a CUDA run of aten::scaled_dot_product_attention
// picks another kernel than the CPU's, which keeps other tensors for its backward. From the
// call's start, what the CPU kernel allocates on this thread is held back from the targets
// whose card runs another kernel; at its end the output is fed and what the card's kernel
// keeps is added, freed when the call's backward has run or its autograd node is destroyed
// (at once without one). In that backward, from the first of the call's nodes to run to the
// last, what the CPU allocates is held back again and the card's kernel's backward allocates
// instead. Where the card runs the math path too, the CPU's allocations are the card's.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <ATen/SequenceNumber.h>
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>

#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/memory/tracking_allocator.h>
#include "harness/memory/rules/gpu_rule.h"

namespace oomguard::memory {
namespace {

constexpr const char* kAttention = "aten::scaled_dot_product_attention";
constexpr const char* kCpuMath = "aten::_scaled_dot_product_attention_math";
constexpr const char* kCpuFlash = "aten::_scaled_dot_product_flash_attention_for_cpu";

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

// The storage of a tensor as the tracker numbered it; 0 for none.
int64_t storage_id(const at::Tensor& t) {
  return t.defined() && t.has_storage() ? TrackingAllocator::allocation_id(t.storage().data_ptr())
                                        : 0;
}

// Tells the watching meter when the attention's autograd node is destroyed (its graph
// released), so what the card's kernel kept is freed in case its backward never ran.
class ReleaseHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit ReleaseHook(int64_t token) : token_(token) {}
  ~ReleaseHook() override { node_released(token_); }
  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list&) override {
    return outputs;
  }

 private:
  int64_t token_;
};

// The autograd nodes the call made: reachable from its output's node and created since the
// call began (an AccumulateGrad, numbered last of all, is the inputs').
std::vector<NodeKey> attention_nodes(const at::Tensor& output, uint64_t first) {
  std::vector<NodeKey> nodes;
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

// The attention call, or its backward, this thread is inside: what the CPU kernel allocates
// is held back from the targets the rule replaces it for.
struct Capture {
  uint64_t rule = 0;  // the serial of the rule it is for; 0 outside a call
  int64_t token = 0;  // the backward's call; 0 in a forward
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
thread_local Capture capture;
// Attention calls this thread is inside, for the rule of that serial (the outermost is
// modelled).
thread_local std::pair<uint64_t, int> attention_depth{0, 0};

// Serials of rules, process-wide: a stale capture never matches another meter's rule.
std::atomic<uint64_t> last_rule_serial{0};

// An attention call whose backward is still to come.
struct PendingBackward {
  std::vector<std::pair<size_t, int64_t>> kept;      // the card's kept tensors: target, id
  std::vector<bool> held;                            // per target: the rule replaces its kernel
  std::vector<std::vector<int64_t>> transient;       // per target: its backward's temporaries
  std::vector<std::pair<size_t, int64_t>> deferred;  // kept inputs, freed: target, id
  int nodes = 0;                                     // the call's nodes yet to run
};

// What the rule did in one target since the phase began.
struct Figures {
  int64_t calls = 0, kept = 0, left_out = 0;
  std::string why;  // the last call's kernel and why
};

class SdpaAttentionRule final : public GpuRule {
 public:
  explicit SdpaAttentionRule(RuleModels& models)
      : models_(models), serial_(last_rule_serial.fetch_add(1) + 1), figures_(models.size()) {}
  ~SdpaAttentionRule() override {
    if (capture.rule == serial_)
      capture = Capture{};
  }

  bool hears(const char* name) const override {
    return std::strcmp(name, kAttention) == 0 ||
           (depth() > 0 && (std::strcmp(name, kCpuMath) == 0 || std::strcmp(name, kCpuFlash) == 0));
  }
  void on_operator_start(const at::RecordFunction& fn) override;
  void on_operator_end(const at::RecordFunction& fn, bool inside_backward) override;
  void on_backward_node(const NodeKey& node, bool start) override;
  void on_node_released(int64_t token) override { forget(token); }
  void hold_back(std::vector<bool>& held) override;
  void on_alloc(int64_t id, int64_t bytes) override;
  void on_free(int64_t id, std::vector<bool>& taken) override;
  void on_phase_start() override;
  std::optional<sim::RuleEffect> effect(size_t i) const override;

 private:
  int depth() const { return attention_depth.first == serial_ ? attention_depth.second : 0; }
  bool capturing() const {
    return capture.rule == serial_ && capture.held.size() == models_.size();
  }
  // This thread is inside an attention call's forward for this rule.
  bool in_call() const {
    return capture.rule == serial_ && capture.token == 0 && capture.plans.size() == models_.size();
  }
  bool in_backward() const { return capture.rule == serial_ && capture.token != 0; }
  void start_call(const sim::AttentionCall& call, const std::vector<int64_t>& inputs);
  void cpu_kernel(bool math);
  void end_call(const at::Tensor& output);
  // Feeds the card's kernel's tensors at the call's end; returns the kept ones: target, id.
  std::vector<std::pair<size_t, int64_t>> feed_card_kernel(
      const Capture& call, int64_t output_id, PendingBackward& backward);
  // Serves and frees at once: a kernel's temporaries.
  void serve_transient(size_t i, const std::vector<int64_t>& sizes);
  void end_backward();
  // Ends this thread's backward window when its call is no longer known.
  void close_stale_capture() {
    if (in_backward() && pending_.count(capture.token) == 0)
      end_backward();  // its call was forgotten (graph gone) while the window was open
  }
  // Frees what the call's kernel kept and forgets the call.
  void forget(int64_t token);

  RuleModels& models_;
  uint64_t serial_;  // this rule among all the process made (from 1)
  std::vector<Figures> figures_;
  std::unordered_map<int64_t, PendingBackward> pending_;  // by token
  std::map<NodeKey, int64_t> node_token_;                 // the calls' nodes -> token
  std::unordered_map<int64_t, int64_t> pinned_;           // input's or output's id -> token
};

void SdpaAttentionRule::on_operator_start(const at::RecordFunction& fn) {
  const char* name = fn.name();
  if (std::strcmp(name, kAttention) != 0) {
    cpu_kernel(std::strcmp(name, kCpuMath) == 0);
    return;
  }
  // Under CUDA autocast where oomguard stands for the card, this call casts q, k and v and calls
  // the operator again: the card's kernel is chosen by that inner call's dtypes, and the casts
  // are the card's allocations, not the CPU kernel's.
  if (amp::cuda_autocast_emulated())
    return;
  if (attention_depth.first != serial_)
    attention_depth = {serial_, 0};
  if (attention_depth.second++ > 0)
    return;
  const std::optional<sim::AttentionCall> call = attention_call(fn.inputs());
  if (!call)
    return;
  std::vector<int64_t> inputs;  // the storages of q, k and v, as the tracker numbered them
  for (size_t i = 0; i < 3; ++i)
    if (const int64_t id = storage_id(fn.inputs()[i].toTensor()); id != 0)
      inputs.push_back(id);
  start_call(*call, inputs);
}

void SdpaAttentionRule::on_operator_end(const at::RecordFunction& fn, bool) {
  if (std::strcmp(fn.name(), kAttention) != 0 || depth() == 0 || --attention_depth.second > 0)
    return;
  const std::vector<c10::IValue>& outputs = fn.outputs();
  end_call(!outputs.empty() && outputs[0].isTensor() ? outputs[0].toTensor() : at::Tensor());
}

void SdpaAttentionRule::start_call(
    const sim::AttentionCall& call, const std::vector<int64_t>& inputs) {
  if (in_backward())
    end_backward();  // a forward inside a backward window: the window is over
  capture = Capture{};
  capture.rule = serial_;
  capture.call = call;
  capture.inputs = inputs;
  capture.first_node = at::sequence_number::peek();
  for (size_t i = 0; i < models_.size(); ++i) {
    const ModelTarget& target = models_.target(i);
    if (target.attention)
      capture.plans.push_back(sim::cuda_attention(call, target.sm, target.torch));
    else
      capture.plans.emplace_back();
    capture.held.push_back(capture.plans.back().has_value());
  }
}

void SdpaAttentionRule::cpu_kernel(bool math) {
  if (!in_call())
    return;
  capture.cpu_math = math;
  if (!math)
    return;
  // The math path on both: what the CPU allocates is what the card would (the dropout mask
  // aside: fp32 here, bool there).
  for (size_t i = 0; i < models_.size(); ++i) {
    std::optional<sim::AttentionPlan>& plan = capture.plans[i];
    if (plan && plan->kernel == sim::AttentionKernel::kMath) {
      ++figures_[i].calls;
      figures_[i].why = plan->why + ", as the CPU ran it";
      plan.reset();
      capture.held[i] = false;
    }
  }
}

void SdpaAttentionRule::serve_transient(size_t i, const std::vector<int64_t>& sizes) {
  for (const int64_t bytes : sizes) {
    const int64_t id = card_only_id();
    if (models_.serve(i, id, bytes))
      models_.release(i, id);
  }
}

std::vector<std::pair<size_t, int64_t>> SdpaAttentionRule::feed_card_kernel(
    const Capture& call, int64_t output_id, PendingBackward& backward) {
  int64_t output_bytes = 0;
  for (const auto& [id, bytes] : call.live)
    if (id == output_id)
      output_bytes = bytes;
  std::vector<std::pair<size_t, int64_t>> kept;  // target, card-only id
  for (size_t i = 0; i < models_.size(); ++i) {
    if (!call.plans[i])
      continue;
    const sim::AttentionPlan& plan = *call.plans[i];
    // The CPU kernel's output is the card's too (same shape and dtype); the rest it allocated
    // is replaced by what the card's kernel keeps.
    if (output_bytes > 0)
      models_.serve(i, output_id, output_bytes);
    serve_transient(i, plan.transient);
    int64_t saved = 0;
    for (const int64_t bytes : plan.saved) {
      const int64_t id = card_only_id();
      if (models_.serve(i, id, bytes))
        kept.emplace_back(i, id);
      saved += bytes;
    }
    backward.held[i] = true;
    backward.transient[i] = plan.backward_transient;
    Figures& f = figures_[i];
    ++f.calls;
    f.kept += saved;
    f.left_out += call.held_back_bytes - output_bytes;
    f.why = plan.why + " in place of the CPU's " + (call.cpu_math ? "math path" : "flash kernel");
  }
  return kept;
}

void SdpaAttentionRule::end_call(const at::Tensor& output) {
  if (!in_call())
    return;
  Capture call = std::move(capture);
  capture = Capture{};
  const int64_t output_id = storage_id(output);
  PendingBackward backward;
  backward.held.assign(models_.size(), false);
  backward.transient.resize(models_.size());
  std::vector<std::pair<size_t, int64_t>> kept = feed_card_kernel(call, output_id, backward);
  const bool hook = call.call.needs_grad && output.defined() && output.grad_fn() != nullptr;
  if (!hook) {  // nothing kept for a backward: freed as the call returns
    for (const auto& [i, id] : kept)
      models_.release(i, id);
    return;
  }
  if (std::find(backward.held.begin(), backward.held.end(), true) == backward.held.end())
    return;                              // the math path on both: the CPU's backward is the card's
  const int64_t token = card_only_id();  // process-wide: a hook outliving this rule finds none
  backward.kept = std::move(kept);
  for (const NodeKey& node : attention_nodes(output, call.first_node)) {
    node_token_[node] = token;
    ++backward.nodes;
  }
  // A fused kernel keeps q, k, v and its output for its backward; the CPU's math path kept
  // copies, and these may be freed before the backward: their frees wait for its end.
  if (call.cpu_math) {
    for (const int64_t id : call.inputs)
      if (id > 0)
        pinned_.emplace(id, token);
    if (output_id > 0)
      pinned_.emplace(output_id, token);
  }
  pending_[token] = std::move(backward);
  output.grad_fn()->add_post_hook(std::make_unique<ReleaseHook>(token));
}

void SdpaAttentionRule::on_backward_node(const NodeKey& node, bool start) {
  const auto found = node_token_.find(node);
  const int64_t token = found == node_token_.end() ? 0 : found->second;
  const bool inside = in_backward();
  if (start) {
    if (inside && capture.token != token)
      end_backward();  // another node: the call's backward is over
    if (token == 0 || capture.rule == serial_)
      return;  // its window is open already, or a forward call is (a backward within it)
    capture = Capture{};
    capture.rule = serial_;
    capture.token = token;
    capture.held = pending_.at(token).held;
    return;
  }
  if (token == 0)
    return;
  node_token_.erase(found);
  PendingBackward& backward = pending_.at(token);
  if (--backward.nodes == 0 && inside && capture.token == token)
    end_backward();
}

void SdpaAttentionRule::end_backward() {
  Capture call = std::move(capture);
  capture = Capture{};
  const auto it = pending_.find(call.token);
  for (size_t i = 0; i < models_.size() && i < call.held.size(); ++i) {
    if (!call.held[i])
      continue;
    // The card's kernel's temporaries (when the call is still known), then the gradients the
    // CPU's backward left live.
    if (it != pending_.end())
      serve_transient(i, it->second.transient[i]);
    int64_t fed = 0;
    for (const auto& [id, bytes] : call.live) {
      models_.serve(i, id, bytes);
      fed += bytes;
    }
    figures_[i].left_out += call.held_back_bytes - fed;
  }
  for (const auto& [i, id] : call.deferred)
    models_.release(i, id);
  forget(call.token);
}

void SdpaAttentionRule::forget(int64_t token) {
  const auto it = pending_.find(token);
  if (it == pending_.end())
    return;
  for (const auto& [i, id] : it->second.kept)
    models_.release(i, id);
  for (const auto& [i, id] : it->second.deferred)
    models_.release(i, id);
  pending_.erase(it);
  for (auto node = node_token_.begin(); node != node_token_.end();)
    node = node->second == token ? node_token_.erase(node) : std::next(node);
  for (auto input = pinned_.begin(); input != pinned_.end();)
    input = input->second == token ? pinned_.erase(input) : std::next(input);
}

void SdpaAttentionRule::hold_back(std::vector<bool>& held) {
  close_stale_capture();
  if (!capturing())
    return;
  for (size_t i = 0; i < held.size(); ++i)
    held[i] = held[i] || capture.held[i];
}

void SdpaAttentionRule::on_alloc(int64_t id, int64_t bytes) {
  if (!capturing())
    return;
  capture.live.emplace_back(id, bytes);
  capture.held_back_bytes += bytes;
}

void SdpaAttentionRule::on_free(int64_t id, std::vector<bool>& taken) {
  close_stale_capture();
  const bool capturing_now = capturing();
  bool held_back = false;
  if (capturing_now) {
    auto& live = capture.live;
    const auto it =
        std::find_if(live.begin(), live.end(), [id](const std::pair<int64_t, int64_t>& a) {
          return a.first == id;
        });
    if (it != live.end()) {
      live.erase(it);
      held_back = true;
    }
  }
  PendingBackward* pinned = nullptr;  // the call whose kernel keeps this input
  if (const auto it = pinned_.find(id); it != pinned_.end()) {
    const auto call = pending_.find(it->second);
    pinned = call == pending_.end() ? nullptr : &call->second;
    pinned_.erase(it);
  }
  for (size_t i = 0; i < models_.size(); ++i) {
    // In a replaced backward, what the CPU's nodes free as they go (the inputs they kept) the
    // card's single kernel frees after it has run: at the window's end.
    if (capturing_now && capture.token != 0 && capture.held[i] && !held_back) {
      capture.deferred.emplace_back(i, id);
      taken[i] = true;
    } else if (pinned != nullptr && pinned->held[i]) {
      pinned->deferred.emplace_back(i, id);
      taken[i] = true;
    }
  }
}

void SdpaAttentionRule::on_phase_start() {
  // A phase begins outside any attention call: a backward window left open (a backward that
  // stopped inside it) ends here.
  if (in_backward())
    end_backward();
  for (Figures& f : figures_)
    f = Figures{};
}

std::optional<sim::RuleEffect> SdpaAttentionRule::effect(size_t i) const {
  const Figures& f = figures_.at(i);
  if (!models_.target(i).attention || f.calls == 0)
    return std::nullopt;
  return sim::RuleEffect{
      "sdpa_attention",
      f.kept,
      std::to_string(f.calls) + " call(s): " + f.why + "; kept " + format_size(f.kept) +
          " for backward, left out " + format_size(f.left_out) + " the CPU kernel allocated"};
}

}  // namespace

std::unique_ptr<GpuRule> sdpa_attention_rule(RuleModels& models) {
  for (size_t i = 0; i < models.size(); ++i)
    if (models.target(i).attention)
      return std::make_unique<SdpaAttentionRule>(models);
  return nullptr;
}

}  // namespace oomguard::memory
