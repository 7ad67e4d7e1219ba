#include "harness/app/run.h"

#include <algorithm>
#include <fstream>
#include <memory>
#include <thread>

#include <ATen/Parallel.h>

#include "data/text_source.h"
#include "harness/app/inputs.h"
#include "harness/app/run_device.h"
#include "harness/app/run_outputs.h"
#include "harness/app/run_worst_case.h"
#include "harness/interrupt.h"
#include "harness/log.h"
#include "harness/memory/built_torch.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/memory/trace_recorder.h>

namespace oomguard::app {
namespace {

nlohmann::json read_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw UsageError("config " + path + ": cannot be opened");
  auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    throw UsageError("config " + path + ": malformed JSON");
  return doc;
}

// The run's config: the config file's, with --set and --disable-guard over it.
run::RunConfig read_config(const RunRequest& args) {
  nlohmann::json overrides = nlohmann::json::object();
  if (!args.config_file.empty())
    overrides = read_config_file(args.config_file);
  for (const auto& s : args.sets)
    run::apply_set(overrides, s);
  for (const auto& g : args.disabled_guards)
    run::disable_guard(overrides, g);
  return run::load_config(overrides);
}

// The data file's samples, none without one. A bad data file is a usage error too: found here,
// before anything runs.
std::vector<std::string> read_file_samples(const run::RunConfig& config) {
  std::vector<std::string> file_samples;
  if (config.data_file.empty())
    return file_samples;
  const auto& g = config.generate;
  file_samples = data::read_samples(config.data_file);
  const auto long_enough = static_cast<int64_t>(phases::prompt_sources(file_samples, g).size());
  if (long_enough < g.prompts)
    throw UsageError(
        "data file " + config.data_file + ": " + std::to_string(long_enough) +
        " samples hold generate.prompt_length = " + std::to_string(g.prompt_length) +
        " bytes, generate.prompts needs " + std::to_string(g.prompts) +
        "; lower generate.prompts or generate.prompt_length");
  run::check_sample_indices(config, file_samples.size());
  return file_samples;
}

// The device (run_device.h) and, on CUDA, its allocator settings (run_alloc_conf.h). Settings a
// CUDA run cannot measure faithfully are refused before the device is looked for, so that the
// refusal reads the same on every machine.
void resolve_device_and_alloc_conf(const RunRequest& args, ResolvedRun& resolved) {
  const bool emulated = !args.card.empty() || !args.capacity.empty();
  const std::string where = args.device.empty() ? "OOMGUARD_DEVICE" : "--device";
  const DeviceAsked asked = parse_device(asked_device(args.device), where);
  const auto check_alloc_conf = [&] {
    check_cuda_alloc_conf(
        resolved.config.alloc_conf,
        emulated,
        resolved.env_alloc_conf,
        resolved.cuda_alloc_settings);
  };
  const bool cuda_asked = asked.kind == "cuda";
  if (cuda_asked)
    check_alloc_conf();
  resolve_device(asked, where, resolved.device, resolved.narrowing);
  if (!cuda_asked && resolved.device == memory::DeviceKind::kCuda)  // auto found a device
    check_alloc_conf();
}

ResolvedRun resolve_given(const RunRequest& args) {
  ResolvedRun resolved;
  resolved.config = read_config(args);
  const std::vector<std::string> file_samples = read_file_samples(resolved.config);
  resolve_device_and_alloc_conf(args, resolved);
  const bool cuda = resolved.device == memory::DeviceKind::kCuda;
  // On the Meta device the model is what gives reserved memory and a card's verdict.
  const std::string allocator_model =
      resolved.device == memory::DeviceKind::kMeta && !args.allocator_model_given
          ? "cuda"
          : args.allocator_model;
  if (!args.card.empty())
    resolved.capacity_bytes = memory::find_card(args.card).capacity_bytes();
  if (!args.capacity.empty())
    resolved.capacity_bytes = parse_capacity(args.capacity);
  // On CUDA, --snapshot is PyTorch's own snapshot of the allocator's recorded history.
  if (!cuda && !args.snapshot_file.empty())
    resolved.snapshot = snapshot_replay(
        resolved.config.alloc_conf, args.card, args.rules, memory::built_torch_version());
  if (cuda && (!args.trace_file.empty() || allocator_model == "cuda"))
    throw UsageError(
        std::string(args.trace_file.empty() ? "--allocator-model cuda" : "--trace") +
        " works on the CPU meter, and this run would use the GPU; add --device cpu");
  if (args.rules != "all" && allocator_model != "cuda" && args.snapshot_file.empty())
    throw UsageError(
        "--rules chooses the allocator model's rules; add --allocator-model cuda (or "
        "--snapshot)");
  if (allocator_model == "cuda") {
    const sim::GpuRules rules = rules_option(args.rules);
    try {
      resolved.model = memory::model_target(
          args.card,
          resolved.capacity_bytes,
          resolved.config.alloc_conf,
          memory::built_torch_version(),
          rules);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--allocator-model cuda: ") + e.what());
    }
  }
  if (args.worst_case)
    resolve_worst_case(args, resolved, file_samples);
  else if (args.orders_given)
    throw UsageError("--orders sets how many orders --worst-case searches; add --worst-case");
  return resolved;
}

// The run's options: the device, its allocator settings and the budget rules it adds.
run::RunOptions run_options(const RunRequest& args, const ResolvedRun& resolved) {
  const run::RunConfig& config = resolved.config;
  run::RunOptions options;
  options.seed = static_cast<uint64_t>(args.seed);
  options.capacity_bytes = resolved.capacity_bytes;
  options.fail_on_retry = args.fail_on_retry;
  options.device.type = resolved.device;
  options.device.card = args.card;
  if (resolved.device == memory::DeviceKind::kCuda) {
    // Each of these may start the process again.
    narrow_to_device(args.argv, resolved.narrowing);
    apply_alloc_conf(args.argv, config.alloc_conf, resolved.env_alloc_conf, options.device);
    options.budget_rules = cuda_budget_rules(args.card, args.argv);
  } else if (!config.alloc_conf.empty()) {
    options.device.alloc_conf = config.alloc_conf;
    options.device.alloc_conf_source = "config";
    if (!resolved.model)
      log::info("memory.alloc_conf has no effect on CPU runs without --allocator-model cuda");
  }
  options.device.allocator_model = resolved.model ? "cuda" : "";
  if (resolved.model) {
    const memory::ModelTarget& model = *resolved.model;
    options.device.model_rules = sim::GpuRules::parse(args.rules).names();
    if (model.workspace.bytes_per_handle > 0) {
      options.device.model_workspace = model.workspace.describe();
      log::info(
          "allocator model: + cuBLAS workspaces, " + options.device.model_workspace +
          ", at the first GEMM of the forward and of the backward");
    }
    if (model.attention)
      log::info(
          "allocator model: scaled-dot-product attention as sm" + std::to_string(model.sm) +
          "'s kernel keeps it (sdpa_attention)");
  }
  return options;
}

// The meters of the run: the CPU's or CUDA's, the emulated card, the trace, the model.
std::unique_ptr<memory::MeterStack> make_meters(
    const RunRequest& args, const ResolvedRun& resolved, const std::string& trace_path) {
  memory::MeterOptions meter_options;
  meter_options.device = memory::to_string(resolved.device);
  meter_options.capacity_bytes = resolved.capacity_bytes;
  meter_options.card = args.card;
  meter_options.trace_path = trace_path;
  if (resolved.model)
    meter_options.model_targets.push_back(*resolved.model);
  // --worst-case with the allocator model: the run recorded step by step, for the order search.
  if (resolved.worst_case)
    meter_options.step_orders = args.orders;
  try {
    return std::make_unique<memory::MeterStack>(meter_options);
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        (args.card.empty() ? "--capacity: " : "--card " + args.card + ": ") +
        std::string(e.what()));
  }
}

}  // namespace

ResolvedRun resolve_run(const RunRequest& request) {
  return given([&] { return resolve_given(request); });
}

run::RunReport execute_run(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const std::function<void(const run::RunReport&)>& on_report) {
  check_writable(args.report_file, "--report");
  run::RunOptions options = run_options(args, resolved);
  check_writable(args.trace_file, "--trace");
  check_writable(args.snapshot_file, "--snapshot");
  // --snapshot on CPU (or Meta) replays the run's trace: the one asked for, or one of its own
  // next to it.
  const bool cpu_snapshot =
      !args.snapshot_file.empty() && resolved.device != memory::DeviceKind::kCuda;
  const std::string trace_path = !args.trace_file.empty() ? args.trace_file
                                 : cpu_snapshot           ? args.snapshot_file + ".trace.tmp"
                                                          : "";
  const int threads = resolved.config.threads > 0
                          ? static_cast<int>(resolved.config.threads)
                          : static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(std::max(threads, 1));
  const std::unique_ptr<memory::MeterStack> stack = make_meters(args, resolved, trace_path);
  memory::CudaMeter* cuda = stack->cuda();
  memory::LiveByTag* live = stack->live();
  memory::TraceRecorder* recorder = stack->recorder();
  if (cuda != nullptr) {
    options.device.name = cuda->device_name();
    options.device.total_bytes = cuda->device_total_bytes();
  }
  log_start(args, resolved, options, cuda);
  const int64_t capacity = resolved.capacity_bytes > 0
                               ? resolved.capacity_bytes
                               : (cuda ? cuda->device_total_bytes() : int64_t{0});
  if (cuda && !args.snapshot_file.empty())
    cuda->record_history();  // from the first phase on: every allocation and free
  memory::CudaSegments segments_seen;
  options.on_phase = phase_logger(capacity, live, cuda, segments_seen);
  install_interrupt_handlers();
  if (resolved.worst_case)
    log::info(
        "worst case: " + resolved.worst_case->inputs + "; train runs " +
        std::to_string(resolved.worst_case->plan.train_steps) + " of " +
        std::to_string(resolved.worst_case->data.train_steps) + " steps");
  run::RunReport report = run::smoke_run(resolved.config, stack->meter(), options);
  memory::TraceRecorder* steps = stack->step_recorder();  // --worst-case with the model
  if (steps)
    stack->tracker().remove_observer(steps);
  if (resolved.worst_case)
    complete_worst_case(args, resolved, steps, cuda != nullptr, report);
  if (recorder)
    stack->tracker().remove_observer(recorder);
  if (live)
    stack->tracker().remove_observer(live);
  complete_report(report, resolved.cuda_alloc_settings, cuda, segments_seen, live);
  write_outputs(args, resolved, report, *stack, trace_path, on_report);
  return report;
}

std::string disabled_guards(const run::Guards& guards) {
  std::string off;
  for (const auto& g : run::guard_table()) {
    if (!(guards.*g.flag))
      off += std::string(off.empty() ? "" : ",") + g.name;
  }
  return off.empty() ? "none" : off;
}

}  // namespace oomguard::app
