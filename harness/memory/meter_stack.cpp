#include <oomguard/memory/meter_stack.h>

#include <oomguard/amp/cuda_autocast.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include <c10/core/CPUAllocator.h>

#include "harness/memory/built_torch.h"
#include "harness/memory/start_again.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include "harness/memory/operator_callbacks.h"
#include <oomguard/meta/meta_device.h>

namespace oomguard::memory {
namespace {

const char* env_or_null(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

}  // namespace

namespace {

// A prediction target from the environment; `what` names where it came from in errors.
ModelTarget target_from_env(
    const std::string& what,
    const std::string& card,
    int64_t capacity_bytes,
    const std::string& alloc_conf,
    const sim::GpuRules& rules) {
  try {
    return model_target(card, capacity_bytes, alloc_conf, built_torch_version(), rules);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(what + ": " + e.what());
  }
}

// OOMGUARD_PREDICT's entries: "CARD_OR_SIZE [SETTINGS]" separated by ';'.
std::vector<ModelTarget> extra_targets(const std::string& text, const sim::GpuRules& rules) {
  std::vector<ModelTarget> targets;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(';', start), text.size());
    std::string entry = text.substr(start, end - start);
    start = end + 1;
    const size_t first = entry.find_first_not_of(" \t");
    if (first == std::string::npos)
      continue;
    entry = entry.substr(first, entry.find_last_not_of(" \t") - first + 1);
    const size_t space = entry.find_first_of(" \t");
    const std::string where = entry.substr(0, space);
    const std::string conf =
        space == std::string::npos ? "" : entry.substr(entry.find_first_not_of(" \t", space));
    const std::string what = "OOMGUARD_PREDICT entry \"" + entry + "\"";
    bool is_card = false;
    for (const CardProfile& card : card_profiles())
      is_card = is_card || card.name == where;
    int64_t capacity = 0;
    if (!is_card) {
      try {
        capacity = parse_size(where);
      } catch (const std::invalid_argument&) {
        throw std::invalid_argument(
            what + ": \"" + where + "\" is neither a card (" + known_cards() +
            ") nor a size such as 12GiB");
      }
      if (capacity <= 0)
        throw std::invalid_argument(what + ": a capacity must be more than 0 bytes");
    }
    targets.push_back(target_from_env(what, is_card ? where : "", capacity, conf, rules));
  }
  return targets;
}

}  // namespace

// OOMGUARD_CARD or OOMGUARD_CAPACITY (`card`, `capacity`: their values, null when unset)
// into `options`.
void capacity_from_env(const char* card, const char* capacity, MeterOptions& options) {
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
}

// OOMGUARD_NAME_OPERATORS into `options`; OOMGUARD_RULES.
sim::GpuRules rules_from_env(MeterOptions& options) {
  if (const char* naming = env_or_null("OOMGUARD_NAME_OPERATORS")) {
    if (std::string(naming) != "0" && std::string(naming) != "1")
      throw std::invalid_argument(
          std::string("OOMGUARD_NAME_OPERATORS=") + naming + ": expected 1 or 0");
    options.name_operators = std::string(naming) == "1";
  }
  sim::GpuRules rules;
  if (const char* names = env_or_null("OOMGUARD_RULES")) {
    try {
      rules = sim::GpuRules::parse(names);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("OOMGUARD_RULES: ") + e.what());
    }
  }
  return rules;
}

// OOMGUARD_ORDERS: the orders of a measure_steps() phase's steps searched; 32 when unset.
int64_t step_orders_from_env() {
  const char* text = env_or_null("OOMGUARD_ORDERS");
  if (text == nullptr)
    return 32;
  char* end = nullptr;
  errno = 0;
  const long long orders = std::strtoll(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text || orders < 0 || orders > 1000000)
    throw std::invalid_argument(
        std::string("OOMGUARD_ORDERS=") + text +
        ": expected a whole number of orders, 0 (none searched) to 1000000");
  return orders;
}

MeterOptions meter_options_from_env() {
  MeterOptions options;
  const DeviceFromEnv device = device_from_env();
  options.device = device.asked.kind;
  // cuda:N is measured as device 0 of a process that sees it alone.
  if (!device.narrowing.empty())
    throw std::invalid_argument(
        std::string("OOMGUARD_DEVICE=") + env_or_null("OOMGUARD_DEVICE") +
        ": this process sees every device; oomguard::gtest_main starts the binary again "
        "seeing that one alone, and in a main of your own set CUDA_VISIBLE_DEVICES=" +
        device.narrowing.front().second + " and OOMGUARD_DEVICE=cuda instead");
  if (const char* trace = env_or_null("OOMGUARD_TRACE")) {
    if (resolve_device(options.device) == "cuda")
      throw std::invalid_argument(
          std::string("OOMGUARD_TRACE=") + trace +
          ": a trace is recorded on the CPU meter, and this binary measures on CUDA; set "
          "OOMGUARD_DEVICE=cpu to record one");
    options.trace_path = trace;
  }
  const char* card = env_or_null("OOMGUARD_CARD");
  const char* capacity = env_or_null("OOMGUARD_CAPACITY");
  capacity_from_env(card, capacity, options);
  const sim::GpuRules rules = rules_from_env(options);
  const int64_t step_orders = step_orders_from_env();
  const char* model = env_or_null("OOMGUARD_ALLOCATOR_MODEL");
  if (model != nullptr && std::string(model) != "cuda" && std::string(model) != "none")
    throw std::invalid_argument(
        std::string("OOMGUARD_ALLOCATOR_MODEL=") + model + ": expected cuda or none");
  const char* predict = env_or_null("OOMGUARD_PREDICT");
  const bool modelled = model == nullptr || std::string(model) == "cuda";
  if (predict != nullptr && (options.capacity_bytes == 0 || !modelled))
    throw std::invalid_argument(
        "OOMGUARD_PREDICT adds cards and settings to the prediction of OOMGUARD_CARD or "
        "OOMGUARD_CAPACITY; set one of them (and leave OOMGUARD_ALLOCATOR_MODEL at cuda)");
  // On the CPU and the Meta device a card is predicted by the model.
  if (options.capacity_bytes == 0 || !modelled || resolve_device(options.device) == "cuda") {
    if (predict != nullptr)
      throw std::invalid_argument(
          "OOMGUARD_PREDICT: predictions are made on the CPU meter, and this binary measures "
          "on CUDA; set OOMGUARD_DEVICE=cpu to predict");
    return options;
  }
  const char* conf = env_or_null("OOMGUARD_ALLOC_CONF");
  options.model_targets.push_back(target_from_env(
      card != nullptr ? "OOMGUARD_CARD" : "OOMGUARD_CAPACITY",
      options.card,
      options.capacity_bytes,
      conf != nullptr ? conf : "",
      rules));
  if (predict != nullptr)
    for (ModelTarget& t : extra_targets(predict, rules))
      options.model_targets.push_back(std::move(t));
  options.step_orders = step_orders;
  return options;
}

std::string resolve_device(const std::string& asked) {
  if (asked == "cpu" || asked == "meta")
    return asked;
  if (asked != "auto" && asked != "cuda")
    throw std::invalid_argument("device " + asked + ": expected auto, cpu, cuda or meta");
  const bool usable = cuda_meter_built() && cuda_device_count() > 0;
  if (asked == "cuda" && !usable)
    throw std::invalid_argument("device cuda: " + cuda_unavailable_reason() + "; or use cpu");
  return usable ? "cuda" : "cpu";
}

namespace {

// The Meta device's allocator, with oomguard's Meta kernels registered.
TrackingAllocator& meta_tracker() {
  meta::use_meta_device();
  return TrackingAllocator::meta();
}

}  // namespace

MeterStack::MeterStack(const MeterOptions& options)
    : options_(options),
      device_(resolve_device(options.device)),
      tracker_(device_ == "meta" ? meta_tracker() : TrackingAllocator::instance()),
      meter_(&tracker_) {
  if (device_ == "cuda" && (!options.trace_path.empty() || !options.model_targets.empty()))
    throw std::invalid_argument(
        "a trace and the allocator model work on the CPU meter, and this stack is on CUDA");
  // The CPU's or Meta's tensors stand for the card's: CUDA autocast casts them as the card's.
  if (device_ != "cuda")
    amp::emulate_cuda_autocast(device_ == "meta" ? c10::DeviceType::Meta : c10::DeviceType::CPU);
  // Observers the tracker holds must not outlive a stack that failed to build.
  try {
    // The recorder comes first: an allocation the model refuses is in the trace (with a free),
    // so a replay of it fails there too.
    if (!options.trace_path.empty())
      recorder_ = std::make_unique<TraceRecorder>(options.trace_path);
    if (options.step_orders > 0 && !options.model_targets.empty())
      steps_ = std::make_unique<TraceRecorder>();
    for (TraceRecorder* r : {recorder_.get(), steps_.get()}) {
      if (r == nullptr)
        continue;
      // What is live already (a model built first) starts the trace, so replayed peaks are the
      // meter's; allocations made by other threads meanwhile may be counted in it or not.
      const int64_t live = tracker_.stats().allocated_bytes;
      if (live > 0)
        r->record_live_before(live);
      tracker_.add_observer(r);
    }
    if (device_ != "cuda" && options.live_by_tag) {
      live_ = std::make_unique<LiveByTag>();
      tracker_.add_observer(live_.get());
      naming_ = options.name_operators;
      if (naming_)
        name_untagged_by_operator(true);
    }
    if (!options.model_targets.empty()) {
      modelled_ = std::make_unique<ModelledMeter>(tracker_, options.model_targets);
      meter_ = modelled_.get();
    }
    if (device_ == "cuda") {
      cuda_ = std::make_unique<CudaMeter>(0);
      meter_ = cuda_.get();
    }
    meter_->set_capacity(options.capacity_bytes);  // throws when the device is smaller
  } catch (...) {
    remove_observers();
    if (device_ != "cuda")
      amp::end_cuda_autocast_emulation();
    throw;
  }
}

MeterStack::~MeterStack() {
  if (device_ != "cuda")
    amp::end_cuda_autocast_emulation();
  meter_->set_capacity(0);
  remove_observers();
}

void MeterStack::remove_observers() {
  if (live_)
    tracker_.remove_observer(live_.get());
  if (naming_) {
    name_untagged_by_operator(false);
    naming_ = false;
  }
  if (recorder_)
    tracker_.remove_observer(recorder_.get());
  if (steps_)
    tracker_.remove_observer(steps_.get());
}

void MeterStack::release_cache() {
  meter_->release_cache();
  if (steps_ != nullptr)
    steps_->on_empty_cache();
}

std::string MeterStack::coverage_gap() const {
  if (device_ == "cuda")
    return "";  // the caching allocator counts from the process's first CUDA allocation
  if (device_ == "meta") {
    if (c10::GetAllocator(c10::DeviceType::Meta) != &tracker_)
      return "LibTorch's Meta allocator is no longer oomguard's (something called "
             "c10::SetAllocator(Meta) with a higher priority): storages since are not counted";
    return "";
  }
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
