// The cpu_scratch rule (sim::GpuRules::cpu_scratch): some CPU kernels allocate scratch that
// the card's kernel for the same operator does not: oneDNN's convolution and LSTM buffers, the
// columns of slow_conv2d and slow_conv_transpose, the upsampling kernels' copies of their
// input and output. From such an operator's start on a CPU tensor, what this thread allocates
// is held back from every target; at its end, its outputs are fed (the card's kernel makes
// them too, same sizes) and the rest is left out. Which operators: sim::is_cpu_scratch_operator.
// What the card's kernel allocates in its place (cuDNN's workspace, which the card frees at
// the kernel's end) is not modelled. Under the emulation of CUDA autocast, a listed operator
// casts its inputs and calls itself again (harness/amp/cuda_autocast.cpp): the casts are the
// card's allocations too, so what the window holds when that inner call begins is fed.
#include <algorithm>
#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>

#include <oomguard/amp/cuda_autocast.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/memory/tracking_allocator.h>
#include "harness/memory/rules/gpu_rule.h"

namespace oomguard::memory {
namespace {

// The operator this thread is inside, for the rule of that serial (the outermost counts).
struct ScratchWindow {
  uint64_t rule = 0;  // 0: none open
  int depth = 0;
  std::string op;
  std::vector<std::pair<int64_t, int64_t>> live;  // held back and still live: id, bytes
  int64_t held_back = 0;                          // every byte held back, freed or not
  // Under the autocast emulation, where the call is: casting its inputs before it calls
  // itself again, inside that call again (its casts fed), or past it (nothing held back).
  enum class Stage { kPlain, kCasting, kRecalled, kPast } stage = Stage::kPlain;
};
thread_local ScratchWindow scratch_window;

// Serials of rules, process-wide: a stale scratch_window never matches another meter's rule.
std::atomic<uint64_t> last_scratch_rule{0};

bool runs_on_cpu(c10::ArrayRef<const c10::IValue> inputs) {
  for (const c10::IValue& input : inputs)
    if (input.isTensor() && input.toTensor().defined())
      return input.toTensor().device().is_cpu();
  return false;
}

// The storages of the operator's outputs, as the tracker numbered them.
std::vector<int64_t> output_storage_ids(const std::vector<c10::IValue>& outputs) {
  std::vector<int64_t> ids;
  auto add = [&ids](const at::Tensor& t) {
    if (t.defined() && t.has_storage())
      ids.push_back(TrackingAllocator::allocation_id(t.storage().data_ptr()));
  };
  for (const c10::IValue& output : outputs) {
    if (output.isTensor())
      add(output.toTensor());
    else if (output.isTensorList())
      for (const at::Tensor& t : output.toTensorVector())
        add(t);
  }
  return ids;
}

// What the rule did since the phase began (the same for every target).
struct ScratchFigures {
  int64_t calls = 0, left_out = 0;
  std::string last;  // the last operator whose scratch was left out
};

class CpuScratchRule final : public GpuRule {
 public:
  explicit CpuScratchRule(RuleModels& models)
      : models_(models), serial_(last_scratch_rule.fetch_add(1) + 1) {}
  ~CpuScratchRule() override {
    if (scratch_window.rule == serial_)
      scratch_window = ScratchWindow{};
  }

  bool hears(const char* name) const override { return sim::is_cpu_scratch_operator(name); }

  void on_operator_start(const at::RecordFunction& fn) override {
    if (open()) {
      if (scratch_window.stage == ScratchWindow::Stage::kCasting &&
          !amp::cuda_autocast_emulated()) {
        feed_casts();  // the emulation's call again, after its casts
        scratch_window.stage = ScratchWindow::Stage::kRecalled;
      }
      ++scratch_window.depth;
      return;
    }
    if (!runs_on_cpu(fn.inputs()))
      return;  // a Meta or CUDA kernel: its allocations are the card's
    scratch_window = ScratchWindow{};
    scratch_window.rule = serial_;
    scratch_window.depth = 1;
    scratch_window.op = fn.name();
    if (amp::cuda_autocast_emulated())
      scratch_window.stage = ScratchWindow::Stage::kCasting;
  }

  void on_operator_end(const at::RecordFunction& fn, bool) override {
    if (!open())
      return;
    // The emulation's call again ends: its outputs are fed while its casts still live, and what
    // the emulation allocates after it (the outputs it counts then) is the card's too.
    if (--scratch_window.depth == 1 && scratch_window.stage == ScratchWindow::Stage::kRecalled) {
      feed_outputs(fn.outputs());
      scratch_window.stage = ScratchWindow::Stage::kPast;
    }
    if (scratch_window.depth > 0)
      return;
    feed_outputs(fn.outputs());
    ScratchWindow call = std::move(scratch_window);
    scratch_window = ScratchWindow{};
    ++figures_.calls;
    figures_.left_out += call.held_back;
    figures_.last = std::move(call.op);
  }

  void hold_back(std::vector<bool>& held) override {
    if (!holding())
      return;
    for (size_t i = 0; i < held.size(); ++i)
      held[i] = held[i] || models_.target(i).cpu_scratch;
  }
  void on_alloc(int64_t id, int64_t bytes) override {
    if (!holding())
      return;
    scratch_window.live.emplace_back(id, bytes);
    scratch_window.held_back += bytes;
  }
  void on_free(int64_t id, std::vector<bool>&) override {
    if (!open())
      return;  // a held-back tensor freed later: no target holds it, its release does nothing
    auto& live = scratch_window.live;
    for (auto it = live.begin(); it != live.end(); ++it)
      if (it->first == id) {
        live.erase(it);
        return;
      }
  }

  void on_phase_start() override { figures_ = ScratchFigures{}; }
  std::optional<sim::RuleEffect> effect(size_t i) const override {
    if (figures_.calls == 0 || !models_.target(i).cpu_scratch)
      return std::nullopt;
    return sim::RuleEffect{
        "cpu_scratch",
        0,
        std::to_string(figures_.calls) + " CPU kernel call(s) (the last " + figures_.last +
            "): left out " + format_size(figures_.left_out) +
            " of scratch the card's kernel does not allocate"};
  }

 private:
  bool open() const { return scratch_window.rule == serial_ && scratch_window.depth > 0; }
  bool holding() const { return open() && scratch_window.stage != ScratchWindow::Stage::kPast; }
  // Feeds a live allocation the window holds back to the targets that apply the rule.
  void feed(int64_t id, int64_t bytes) {
    for (size_t i = 0; i < models_.size(); ++i)
      if (models_.target(i).cpu_scratch)
        models_.serve(i, id, bytes);
    scratch_window.held_back -= bytes;
  }
  // Feeds what the window holds so far (the autocast emulation's casts) and holds it no more.
  void feed_casts() {
    for (const auto& [id, bytes] : scratch_window.live)
      feed(id, bytes);
    scratch_window.live.clear();
  }
  // Feeds the outputs among what the window holds: the card's kernel makes them too.
  void feed_outputs(const std::vector<c10::IValue>& outputs) {
    auto& live = scratch_window.live;
    for (const int64_t id : output_storage_ids(outputs)) {
      const auto it =
          std::find_if(live.begin(), live.end(), [id](const std::pair<int64_t, int64_t>& a) {
            return a.first == id;
          });
      if (it == live.end())
        continue;
      feed(it->first, it->second);
      live.erase(it);
    }
  }

  RuleModels& models_;
  uint64_t serial_;
  ScratchFigures figures_;
};

}  // namespace

std::unique_ptr<GpuRule> cpu_scratch_rule(RuleModels& models) {
  for (size_t i = 0; i < models.size(); ++i)
    if (models.target(i).cpu_scratch)
      return std::make_unique<CpuScratchRule>(models);
  return nullptr;
}

}  // namespace oomguard::memory
