#include <oomguard/memory/meter_stack.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <c10/core/CPUAllocator.h>

#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>

namespace oomguard::memory {
namespace {

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

MeterOptions meter_options_from_env() {
  MeterOptions options;
  if (const char* device = env_or_null("OOMGUARD_DEVICE")) {
    options.device = device;
    if (options.device != "auto" && options.device != "cpu" && options.device != "cuda")
      throw std::invalid_argument(
          "OOMGUARD_DEVICE=" + options.device + ": expected auto, cpu or cuda");
  }
  const char* card = env_or_null("OOMGUARD_CARD");
  const char* capacity = env_or_null("OOMGUARD_CAPACITY");
  if (card != nullptr && capacity != nullptr)
    throw std::invalid_argument(
        "OOMGUARD_CARD and OOMGUARD_CAPACITY are both set: a card is a capacity, set one");
  try {
    if (card != nullptr) {
      options.card = card;
      options.capacity_bytes = find_card(card).capacity_bytes();
    } else if (capacity != nullptr) {
      options.capacity_bytes = parse_size(capacity);
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(
        std::string(card != nullptr ? "OOMGUARD_CARD: " : "OOMGUARD_CAPACITY: ") + e.what());
  }
  if (capacity != nullptr && options.capacity_bytes <= 0)
    throw std::invalid_argument(
        std::string("OOMGUARD_CAPACITY=") + capacity +
        ": must be more than 0 bytes; unset it for no limit");
  return options;
}

std::string resolve_device(const std::string& asked) {
  if (asked == "cpu")
    return "cpu";
  if (asked != "auto" && asked != "cuda")
    throw std::invalid_argument("device " + asked + ": expected auto, cpu or cuda");
  const bool usable = cuda_meter_built() && cuda_device_count() > 0;
  if (asked == "cuda" && !usable)
    throw std::invalid_argument("device cuda: " + cuda_unavailable_reason() + "; or use cpu");
  return usable ? "cuda" : "cpu";
}

MeterStack::MeterStack(const MeterOptions& options)
    : options_(options),
      device_(resolve_device(options.device)),
      tracker_(TrackingAllocator::instance()),
      meter_(&tracker_) {
  if (device_ == "cuda" && (!options.trace_path.empty() || options.model_settings))
    throw std::invalid_argument(
        "a trace and the allocator model work on the CPU meter, and this stack is on CUDA");
  // Observers the tracker holds must not outlive a stack that failed to build.
  try {
    // The recorder comes first: an allocation the model refuses is in the trace (with a free),
    // so a replay of it fails there too.
    if (!options.trace_path.empty()) {
      recorder_ = std::make_unique<TraceRecorder>(options.trace_path);
      // What is live already (a model built first) starts the trace, so replayed peaks are the
      // meter's; allocations made by other threads meanwhile may be counted in it or not.
      const int64_t live = tracker_.stats().allocated_bytes;
      if (live > 0)
        recorder_->record_live_before(live);
      tracker_.add_observer(recorder_.get());
    }
    if (device_ == "cpu" && options.live_by_tag) {
      live_ = std::make_unique<LiveByTag>();
      tracker_.add_observer(live_.get());
    }
    if (options.model_settings) {
      modelled_ = std::make_unique<ModelledMeter>(
          tracker_, *options.model_settings, options.model_device, options.model_workspace_bytes);
      meter_ = modelled_.get();
    }
    if (device_ == "cuda") {
      cuda_ = std::make_unique<CudaMeter>(0);
      meter_ = cuda_.get();
    }
    meter_->set_capacity(options.capacity_bytes);  // throws when the device is smaller
  } catch (...) {
    remove_observers();
    throw;
  }
}

MeterStack::~MeterStack() {
  meter_->set_capacity(0);
  remove_observers();
}

void MeterStack::remove_observers() {
  if (live_)
    tracker_.remove_observer(live_.get());
  if (recorder_)
    tracker_.remove_observer(recorder_.get());
}

std::string MeterStack::coverage_gap() const {
  if (device_ == "cuda")
    return "";  // the caching allocator counts from the process's first CUDA allocation
  if (c10::GetCPUAllocator() != &tracker_)
    return "LibTorch's CPU allocator is no longer oomguard's tracking allocator (something "
           "called c10::SetCPUAllocator with a higher priority): allocations since are not "
           "counted";
  return "";
}

namespace {
std::mutex g_install_mutex;
MeterStack* g_installed = nullptr;  // never destroyed: CUDA may be gone by the exit handlers
}  // namespace

MeterStack& install_meter(const MeterOptions& options) {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_installed == nullptr)
    g_installed = new MeterStack(options);
  return *g_installed;
}

MeterStack* installed_meter() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  return g_installed;
}

}  // namespace oomguard::memory
