#pragma once
// MeterStack: the meters of one process composed in one place. The CPU tracking allocator
// always counts; on top of it, optionally, a trace recorder, the live-bytes-by-tag observer
// and the caching-allocator model; on CUDA the caching allocator's own statistics.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/live_by_tag.h>
#include <oomguard/memory/meter.h>
#include <oomguard/memory/modelled_meter.h>
#include <oomguard/memory/trace_recorder.h>
#include <oomguard/memory/tracking_allocator.h>

namespace oomguard::memory {

struct MeterOptions {
  // auto: CUDA when this build has the CUDA meter and a device is visible, else CPU; meta:
  // the Meta device's storages are what is counted (TrackingAllocator::meta(), with
  // oomguard's Meta kernels), and a trace, LiveByTag and the model watch them.
  std::string device = "auto";
  // The emulated card: the most the process may hold, 0 for no limit (Meter::set_capacity).
  int64_t capacity_bytes = 0;
  std::string card;  // the card profile the capacity came from, empty for none
  // CPU or Meta: a JSON Lines trace of every allocation (<oomguard/sim/trace.h>), empty for none.
  std::string trace_path;
  // CPU or Meta: keep what is live by tag at each phase's peak (LiveByTag).
  bool live_by_tag = true;
  // With live_by_tag: an allocation outside every AllocTag is filed under the operator (or
  // autograd node) running when it was made, "untagged: aten::linear", through a
  // RecordFunction callback on every operator; false: "(untagged)" (OOMGUARD_NAME_OPERATORS=0).
  bool name_operators = true;
  // CPU or Meta: feed the caching-allocator model of each target, so reserved memory and
  // fragmentation are predicted and the first target's card fails as the CUDA allocator
  // would (ModelledMeter); empty for no model. The first target's capacity is capacity_bytes.
  std::vector<ModelTarget> model_targets;
  // With the model: each measure_steps() phase's reserved peak is also searched over this many
  // orders of its steps (<oomguard/gtest.h>), the process recorded step by step in memory for
  // it from the stack's start; 0: none recorded or searched (OOMGUARD_ORDERS).
  int64_t step_orders = 0;
};

// MeterOptions from the environment: OOMGUARD_DEVICE (auto, cpu, meta, cuda, or cuda:N in a
// process started again seeing that device alone, as oomguard::gtest_main does), OOMGUARD_TRACE
// (a trace file for the CPU or Meta meter: every allocation of the process, for oomguard
// replay), OOMGUARD_CARD (a card profile, <oomguard/memory/cards.h>) or OOMGUARD_CAPACITY (a
// size such as "12GiB"). On the CPU or Meta meter a card or capacity is predicted by the
// caching-allocator model (OOMGUARD_ALLOCATOR_MODEL=cuda, the default; none holds the CPU bytes to
// the capacity instead) with the settings in OOMGUARD_ALLOC_CONF and the rules in OOMGUARD_RULES
// (all, none, or names: <oomguard/sim/gpu_rules.h>), and OOMGUARD_PREDICT adds more cards and
// settings to predict alongside: "CARD_OR_SIZE [SETTINGS]; ..." ("t4
// expandable_segments:True; a100-80"), and OOMGUARD_ORDERS how many orders of a
// measure_steps() phase's steps are searched (default 32 with the model, 0 for none). Throws
// std::invalid_argument naming the variable and what it accepts.
MeterOptions meter_options_from_env();

// "cpu", "cuda" or "meta" for `asked` (auto, cpu, cuda, meta); throws std::invalid_argument
// when CUDA is asked for and this build or machine has none.
std::string resolve_device(const std::string& asked);

class MeterStack {
 public:
  // Builds the stack; throws std::invalid_argument for an option this machine cannot honour
  // (CUDA without a device, a capacity above the device's memory).
  explicit MeterStack(const MeterOptions& options);
  ~MeterStack();  // observers removed, capacity lifted
  MeterStack(const MeterStack&) = delete;
  MeterStack& operator=(const MeterStack&) = delete;

  // The meter phases are measured with: CUDA stats, the model, or the CPU tracker.
  Meter& meter() { return *meter_; }
  // The meter's release_cache(), and the step recording told of it, so the replays of a
  // phase's orders start from the pool the run had.
  void release_cache();
  const std::string& device() const { return device_; }  // "cpu", "cuda" or "meta"
  const MeterOptions& options() const { return options_; }
  TrackingAllocator& tracker() { return tracker_; }
  LiveByTag* live() { return live_.get(); }              // null on CUDA or when off
  TraceRecorder* recorder() { return recorder_.get(); }  // null without a trace
  // The process recorded step by step in memory (MeterOptions::step_orders), else null.
  TraceRecorder* step_recorder() { return steps_.get(); }
  CudaMeter* cuda() { return cuda_.get(); }              // null on CPU and Meta
  ModelledMeter* modelled() { return modelled_.get(); }  // null without the model
  // Why the figures may miss allocations, empty when the meter sees them all: on CPU, the
  // tracking allocator is no longer LibTorch's CPU allocator; on Meta, oomguard's Meta
  // allocator is no longer LibTorch's Meta allocator (something replaced it with a higher
  // priority). Always empty on CUDA.
  std::string coverage_gap() const;

 private:
  void remove_observers();  // the recorder's and LiveByTag's, which the tracker holds

  MeterOptions options_;
  std::string device_;
  TrackingAllocator& tracker_;
  std::unique_ptr<TraceRecorder> recorder_;
  std::unique_ptr<TraceRecorder> steps_;
  std::unique_ptr<LiveByTag> live_;
  bool naming_ = false;  // this stack switched naming untagged allocations by operator on
  std::unique_ptr<ModelledMeter> modelled_;
  std::unique_ptr<CudaMeter> cuda_;
  Meter* meter_;
};

// The process's meter stack, built from `options` on the first call (later calls return it
// and ignore their argument). The CPU tracking allocator itself is installed before the
// program's own static initializers run, whenever this library is linked in.
MeterStack& install_meter(const MeterOptions& options = meter_options_from_env());
// The stack install_meter built, or null before it was called.
MeterStack* installed_meter();

}  // namespace oomguard::memory
