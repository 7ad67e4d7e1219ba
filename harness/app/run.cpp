#include "harness/app/run.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include <ATen/Parallel.h>

#include "data/corpus.h"
#include "data/text_source.h"
#include "harness/memory/built_torch.h"
#include "harness/app/inputs.h"
#include "harness/app/repeat.h"
#include "harness/atomic_file.h"
#include "harness/interrupt.h"
#include "harness/log.h"
#include "harness/shell_quote.h"
#include "harness/memory/start_again.h"
#include "harness/run/cuda_budget.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/live_by_tag.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/memory/trace_recorder.h>
#include <oomguard/sim/alloc_conf.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot_export.h>
#include <oomguard/sim/trace.h>

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

// The device the run takes: auto takes CUDA when this build has the CUDA meter and a device is
// visible; cuda:N is the N-th visible device, which execute_run makes the process's only one
// (`resolved.narrowing`). `where` names where it was asked for (--device, or OOMGUARD_DEVICE as
// for the GoogleTest layer).
void resolve_device(const DeviceAsked& asked, const std::string& where, ResolvedRun& resolved) {
  try {
    resolved.device = memory::device_kind_from_string(memory::resolve_device(asked.kind));
    resolved.narrowing = memory::cuda_device_settings(asked.index);
  } catch (const std::invalid_argument& e) {
    throw UsageError((where == "--device" ? "--" : where + ": ") + std::string(e.what()));
  }
}

// cuda:N with N > 0: the process starts again seeing that device alone (CUDA_VISIBLE_DEVICES,
// from its own list where it has one), so that it is device 0 to LibTorch and the meter.
void narrow_to_device(const RunRequest& args, const memory::EnvSettings& narrowing) {
  if (narrowing.empty())
    return;
  log::info("device: starting again with CUDA_VISIBLE_DEVICES=" + narrowing.front().second);
  memory::start_again(args.argv, narrowing);
}

constexpr const char* kAllocConfFromConfig = "OOMGUARD_ALLOC_CONF_FROM_CONFIG";

// Throws UsageError when two of the variables disagree.
EnvAllocConf env_alloc_conf(sim::TorchVersion torch) {
  EnvAllocConf env;
  for (const char* name : sim::alloc_conf_variables(torch)) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') {
      env.all_set = false;
    } else if (env.variable == nullptr) {
      env.variable = name;
      env.value = value;
    } else if (env.value != value) {
      throw UsageError(
          std::string(env.variable) + "=" + env.value + " and " + name + "=" + value +
          " disagree: LibTorch 2.9's CUDA allocator reads only the first, later ones read it "
          "first and their device-generic settings the second; give both one value");
    }
  }
  return env;
}

// Allocator settings under which a CUDA run's figures would not be the card's: throws
// UsageError naming why. The settings are the environment's, else memory.alloc_conf.
// - garbage_collection_threshold acts only under a memory fraction (CUDACachingAllocator.cpp:
//   `set_fraction && garbage_collection_threshold() > 0`), and an emulated card is a memory
//   fraction: the run would collect garbage where the real card, without one, never does;
// - backend:cudaMallocAsync leaves the native allocator's statistics untouched
//   (CUDAMallocAsyncAllocator.cpp, getDeviceStats): no retries or OOM counts to check.
void refuse_unmeasurable_alloc_conf(const sim::AllocatorSettings& settings, bool emulated_card) {
  if (emulated_card && settings.garbage_collection_threshold > 0)
    throw UsageError(
        "allocator setting garbage_collection_threshold on an emulated card: the card is "
        "emulated by a memory fraction, and the allocator collects garbage only under one, "
        "so this run would free cache where the real card never does; drop the setting, or "
        "run without --card/--capacity on the card itself");
  if (settings.cuda_malloc_async)
    throw UsageError(
        "allocator setting backend:cudaMallocAsync: its statistics have no allocator "
        "retries or OOM counts (CUDAMallocAsyncAllocator leaves them at 0), so oomguard "
        "cannot check this run's near-OOMs; measure with the native allocator (drop "
        "backend)");
}

// A CUDA run's allocator settings: the environment's (read once into `resolved`), else
// memory.alloc_conf (checked when the config was read); refused where the environment's are
// malformed or the run could not measure under them.
void check_cuda_alloc_conf(ResolvedRun& resolved, bool emulated_card) {
  const sim::TorchVersion torch = memory::built_torch_version();
  resolved.env_alloc_conf = env_alloc_conf(torch);
  const EnvAllocConf& env = resolved.env_alloc_conf;
  const std::string& conf = env.variable != nullptr ? env.value : resolved.config.alloc_conf;
  try {
    resolved.cuda_alloc_settings = sim::read_alloc_conf(conf, torch);
  } catch (const std::invalid_argument& e) {
    throw UsageError(
        std::string(env.variable != nullptr ? env.variable : "config key") + ": " + e.what());
  }
  refuse_unmeasurable_alloc_conf(resolved.cuda_alloc_settings, emulated_card);
}

// The caching allocator reads its settings from the environment once, possibly as early as
// when LibTorch loads. So memory.alloc_conf goes into the environment and the process starts
// again with it (execv does not return); a value already there is respected.
void apply_alloc_conf(const RunRequest& args, const ResolvedRun& resolved, run::DeviceReport& d) {
  const run::RunConfig& config = resolved.config;
  const sim::TorchVersion torch = memory::built_torch_version();
  const EnvAllocConf& env = resolved.env_alloc_conf;
  const char* ours = std::getenv(kAllocConfFromConfig);
  if (env.variable != nullptr) {
    d.alloc_conf = env.value;
    d.alloc_conf_source = ours != nullptr && d.alloc_conf == ours ? "config" : "environment";
    if (d.alloc_conf_source == "environment" && !config.alloc_conf.empty() &&
        config.alloc_conf != d.alloc_conf)
      log::warn(
          std::string(env.variable) + "=" + d.alloc_conf + " from the environment is used; " +
          "memory.alloc_conf=" + config.alloc_conf + " is not");
    // One variable of two given (2.9+): the process starts again with both, or 2.9's CUDA
    // allocator would not see a PYTORCH_ALLOC_CONF alone.
    if (!env.all_set)
      memory::start_again(args.argv, memory::alloc_conf_settings(d.alloc_conf));
    return;
  }
  if (config.alloc_conf.empty()) {
    d.alloc_conf_source = "default";
    return;
  }
  log::info(
      std::string("memory.alloc_conf: starting again with ") + sim::alloc_conf_variable(torch) +
      (sim::alloc_conf_variables(torch).size() > 1 ? " and PYTORCH_ALLOC_CONF" : "") + "=" +
      config.alloc_conf);
  memory::start_again(
      args.argv, memory::alloc_conf_settings(config.alloc_conf, kAllocConfFromConfig));
}

constexpr const char* kWorkspaceFromCard = "OOMGUARD_CUBLAS_WORKSPACE_CONFIG_FROM_CARD";

// The config's budgets are CPU figures; a CUDA run also holds the cuBLAS workspaces of the
// card it stands for (run::cuda_budget). Emulating a card whose workspace size differs from
// the device's, the process starts again with CUBLAS_WORKSPACE_CONFIG set to the card's, so
// the device allocates what the card would (a user's own CUBLAS_WORKSPACE_CONFIG is kept).
std::vector<run::BudgetRule> cuda_budget_rules(const RunRequest& args) {
  const int device_sm = memory::cuda_compute_capability(0);
  const int card_sm = args.card.empty() ? 0 : memory::find_card(args.card).compute_capability;
  const char* env = std::getenv("CUBLAS_WORKSPACE_CONFIG");
  const char* ours = std::getenv(kWorkspaceFromCard);
  const bool is_ours = env != nullptr && ours != nullptr && std::string(env) == ours;
  run::CudaBudget budget;
  try {
    budget = run::cuda_budget(
        device_sm, card_sm, memory::built_torch_version(), env != nullptr ? env : "", is_ours);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!budget.workspace_config_to_set.empty()) {
    log::info(
        "--card " + args.card + ": starting again with CUBLAS_WORKSPACE_CONFIG=" +
        budget.workspace_config_to_set + " (the card's cuBLAS workspace, not this device's)");
    memory::start_again(
        args.argv,
        {{"CUBLAS_WORKSPACE_CONFIG", budget.workspace_config_to_set},
         {kWorkspaceFromCard, budget.workspace_config_to_set}});
  }
  for (const auto& rule : budget.rules)
    log::info(
        "budgets: + " + rule.name + " " + memory::format_size(rule.bytes) + ": " + rule.detail);
  return budget.rules;
}

// --snapshot on CPU: the settings its replay of the run's trace uses (memory.alloc_conf), and
// the card's cuBLAS workspaces at the trace's matrix products.
void resolve_cpu_snapshot(const RunRequest& args, ResolvedRun& resolved) {
  try {
    resolved.snapshot_settings = sim::AllocatorSettings::parse(
        resolved.config.alloc_conf, memory::built_torch_version().number());
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--snapshot: ") + e.what());
  }
  if (resolved.snapshot_settings->expandable_segments)
    throw UsageError(
        "--snapshot: memory.alloc_conf has expandable_segments:True, whose pages are not "
        "segments of their own; a snapshot is written for the other settings");
  // The card's cuBLAS workspaces where the trace marks its matrix products, as a CUDA
  // snapshot shows them.
  const int sm =
      args.card.empty() ? memory::kDefaultModelSm : memory::find_card(args.card).compute_capability;
  try {
    resolved.snapshot_workspace =
        sim::cublas_workspace_rule(sm, memory::built_torch_version(), rules_option(args.rules));
  } catch (const std::invalid_argument& e) {
    throw UsageError(std::string("--snapshot: ") + e.what());
  }
}

// What the worst case depends on: the samples' lengths (a data file's, or the synthetic
// corpus the seed draws, whose samples the plan may lengthen to the longest the generator
// draws), the loaders' seed, the collator, the phases and the guards.
WorstCaseData worst_case_data(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const std::vector<std::string>& file_samples) {
  const run::RunConfig& c = resolved.config;
  WorstCaseData d;
  d.synthetic = file_samples.empty();
  d.seed = static_cast<uint64_t>(args.seed);
  data::CorpusConfig corpus = c.corpus;
  corpus.seed = d.seed;
  for (const std::string& s : d.synthetic ? data::make_synthetic_corpus(corpus) : file_samples)
    d.lengths.push_back(static_cast<int64_t>(s.size()));
  d.longest_length = data::longest_synthetic_length(c.corpus);
  d.shortest_long_length = data::shortest_long_tail_length(c.corpus);
  d.batch_size = c.batch_size;
  d.pad_to_longest = !c.guards.truncate;
  d.cut = c.guards.truncate ? c.max_length : c.model.max_seq_len;
  d.train_steps = c.train.steps;
  // The reserved figures depend on the whole train phase: its every step runs.
  d.every_train_step = resolved.model.has_value() || resolved.device == memory::DeviceKind::kCuda;
  d.evaluate_batches = c.evaluate.batches;
  d.prompts = c.generate.prompts;
  d.prompt_length = c.generate.prompt_length;
  d.cap_new_tokens = c.guards.max_new_tokens;
  d.max_new_tokens = c.generate.max_new_tokens;
  d.max_seq_len = c.model.max_seq_len;
  return d;
}

// --worst-case: the plan, and the run's config made to take its inputs (the report's config
// stays the one asked for; its worst_case section says what ran).
void resolve_worst_case(
    const RunRequest& args, ResolvedRun& resolved, const std::vector<std::string>& file_samples) {
  run::RunConfig& c = resolved.config;
  if (!c.train_order.empty() || !c.evaluate_order.empty() || !c.corpus.sample_lengths.empty())
    throw UsageError(
        "--worst-case chooses data.train_order, data.evaluate_order and data.sample_lengths "
        "itself; drop them (or drop --worst-case to run the inputs given)");
  if (args.orders < 1)
    throw UsageError("--orders " + std::to_string(args.orders) + ": expected 1 or more");
  if (c.generate.stop_at_eos)
    throw UsageError(
        "--worst-case runs generation until the longest prompt source ends, and "
        "generate.stop_at_eos would end it where the tokens drawn say; set it false");
  ResolvedRun::WorstCase w;
  w.data = worst_case_data(args, resolved, file_samples);
  w.plan = plan_worst_case(w.data);
  const int64_t longest = *std::max_element(w.plan.lengths.begin(), w.plan.lengths.end());
  w.inputs = w.data.synthetic
                 ? "the synthetic corpus of seed " + std::to_string(args.seed) + " with " +
                       std::to_string(w.plan.sample_lengths.size()) +
                       " samples of lengths set (data.sample_lengths; the longest the generator "
                       "draws, " +
                       std::to_string(w.data.longest_length) + " bytes for data.max_length " +
                       std::to_string(c.max_length) + " and data.long_tail_factor " +
                       nlohmann::json(c.corpus.long_tail_factor).dump() + "), in the seed's order"
                 : "data file " + c.data_file + " (" + std::to_string(w.plan.lengths.size()) +
                       " samples, the longest " + std::to_string(longest) +
                       " bytes) in the orders named: seed " + std::to_string(args.seed) +
                       "'s with the longest samples swapped in";
  c.train_order = w.plan.train_order;
  c.evaluate_order = w.plan.evaluate_order;
  c.train.steps = w.plan.train_steps;
  c.corpus.sample_lengths = w.plan.sample_lengths;
  resolved.worst_case = std::move(w);
}

ResolvedRun resolve_given(const RunRequest& args) {
  nlohmann::json overrides = nlohmann::json::object();
  if (!args.config_file.empty())
    overrides = read_config_file(args.config_file);
  for (const auto& s : args.sets)
    run::apply_set(overrides, s);
  for (const auto& g : args.disabled_guards)
    run::disable_guard(overrides, g);
  ResolvedRun resolved;
  resolved.config = run::load_config(overrides);
  // A bad data file is a usage error too: found here, before anything runs.
  std::vector<std::string> file_samples;
  if (!resolved.config.data_file.empty()) {
    const auto& g = resolved.config.generate;
    file_samples = data::read_samples(resolved.config.data_file);
    const auto long_enough = static_cast<int64_t>(phases::prompt_sources(file_samples, g).size());
    if (long_enough < g.prompts)
      throw UsageError(
          "data file " + resolved.config.data_file + ": " + std::to_string(long_enough) +
          " samples hold generate.prompt_length = " + std::to_string(g.prompt_length) +
          " bytes, generate.prompts needs " + std::to_string(g.prompts) +
          "; lower generate.prompts or generate.prompt_length");
    run::check_sample_indices(resolved.config, file_samples.size());
  }
  // Settings a CUDA run cannot measure faithfully are refused before the device is looked
  // for, so that the refusal reads the same on every machine.
  const bool emulated = !args.card.empty() || !args.capacity.empty();
  const std::string where = args.device.empty() ? "OOMGUARD_DEVICE" : "--device";
  const DeviceAsked asked = parse_device(asked_device(args.device), where);
  const bool cuda_asked = asked.kind == "cuda";
  if (cuda_asked)
    check_cuda_alloc_conf(resolved, emulated);
  resolve_device(asked, where, resolved);
  const bool cuda = resolved.device == memory::DeviceKind::kCuda;
  if (!cuda_asked && cuda)  // auto found a device
    check_cuda_alloc_conf(resolved, emulated);
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
    resolve_cpu_snapshot(args, resolved);
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

// The run's trace replayed through the caching-allocator model (the run's settings and card)
// and written as a PyTorch memory snapshot; a trace of the snapshot's own is removed after.
void write_snapshot(
    const std::string& trace_path, const RunRequest& args, const ResolvedRun& resolved) {
  std::ifstream in(trace_path);
  const sim::Trace trace = sim::read_trace(in, trace_path);
  in.close();
  if (args.trace_file.empty())
    std::remove(trace_path.c_str());
  sim::DeviceLimits device = resolved.model ? resolved.model->device : sim::DeviceLimits{};
  if (device.total_bytes == 0 && resolved.capacity_bytes > 0)
    device = sim::DeviceLimits::capacity(resolved.capacity_bytes);
  sim::DeviceTrace device_trace;
  const sim::ReplayResult r = sim::replay(
      trace,
      *resolved.snapshot_settings,
      device,
      nullptr,
      &device_trace,
      resolved.snapshot_workspace.bytes_per_handle);
  write_file_atomically(
      args.snapshot_file,
      sim::snapshot_pickle(
          trace, device_trace, resolved.config.alloc_conf, /*expandable_segments=*/false));
  log::info(
      "snapshot: " + std::to_string(device_trace.entries.size()) + " entries, " +
      std::to_string(device_trace.segments.size()) + " segments, reserved peak " +
      memory::format_size(r.peak_reserved_bytes) + " in " + args.snapshot_file +
      "; python -m torch.cuda._memory_viz trace " + args.snapshot_file + " reads it");
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
    narrow_to_device(args, resolved.narrowing);        // may start the process again
    apply_alloc_conf(args, resolved, options.device);  // may start the process again
    options.budget_rules = cuda_budget_rules(args);    // may start the process again
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

// What the run is about to do: the card, its emulation on a bigger GPU, the run's settings.
void log_start(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const run::RunOptions& options,
    const memory::CudaMeter* cuda) {
  if (!args.card.empty()) {
    const auto& card = memory::find_card(args.card);
    log::info(
        "card " + card.name + ": total " + memory::format_size(card.total_bytes) + " (" +
        card.note + "), context reserve " + memory::format_size(card.context_bytes) +
        " -> capacity " + memory::format_size(resolved.capacity_bytes));
  }
  if (cuda && resolved.capacity_bytes > 0) {
    char fraction[32];
    std::snprintf(
        fraction,
        sizeof(fraction),
        "%.4f",
        static_cast<double>(resolved.capacity_bytes) /
            static_cast<double>(cuda->device_total_bytes()));
    log::info(
        "emulated on " + cuda->device_name() + " (" +
        memory::format_size(cuda->device_total_bytes()) + "): memory fraction " + fraction +
        ". Peaks here can differ from the real card's " +
        "(other kernels, cuBLAS/cuDNN workspaces, no other process): keep a margin against it");
  }
  log::info(
      "oomguard run: seed " + std::to_string(args.seed) + ", device " +
      (cuda ? "cuda (" + cuda->device_name() + ")"
            : std::string(memory::to_string(resolved.device))) +
      (resolved.device == memory::DeviceKind::kMeta ? " (shapes alone)" : "") + ", " +
      std::to_string(at::get_num_threads()) + " threads, capacity " +
      (resolved.capacity_bytes > 0 ? memory::format_size(resolved.capacity_bytes)
                                   : std::string("none")) +
      ", guards off: " + disabled_guards(resolved.config.guards) +
      (options.device.alloc_conf.empty() ? std::string()
                                         : ", alloc_conf " + options.device.alloc_conf + " (" +
                                               options.device.alloc_conf_source + ")"));
}

// The [mem] line of each phase as it ends, what was live at a failed phase's peak, and a
// near-OOM's warning; on CUDA it also keeps the phase end at which the allocator held the
// most segments.
std::function<void(const run::PhaseReport&)> phase_logger(
    int64_t capacity,
    memory::LiveByTag* live,
    memory::CudaMeter* cuda,
    memory::CudaSegments& segments_seen) {
  return [capacity, live, cuda, &segments_seen](const run::PhaseReport& p) {
    if (cuda) {
      const memory::CudaSegments now = cuda->segments();
      if (now.segments >= segments_seen.segments)
        segments_seen = now;
    }
    char pct[32];
    std::snprintf(pct, sizeof(pct), "%.1f%%", run::headroom_percent(p));
    std::string line = "[mem] phase=" + p.memory.name +
                       " peak=" + memory::format_size(p.memory.peak_allocated_bytes) +
                       " budget=" + memory::format_size(p.budget_bytes) + " headroom=" + pct;
    if (p.memory.peak_reserved_bytes >= 0) {
      line += " reserved=" + memory::format_size(p.memory.peak_reserved_bytes) +
              " retries=" + std::to_string(p.memory.num_alloc_retries);
      if (capacity > 0)
        line += " card_margin=" + memory::format_size(capacity - p.memory.peak_reserved_bytes);
    }
    log::info(line + " status=" + memory::to_string(p.status));
    if (live && p.status != memory::PhaseStatus::kPass)
      log::info(
          "[mem] live at the " + p.memory.name + " peak: " +
          memory::describe_live(live->live_at_peak(p.memory.name, p.memory.peak_allocated_bytes)));
    if (p.memory.num_alloc_retries > 0)
      log::warn(
          "near-OOM in phase " + p.memory.name + ": the allocator freed its cache and retried " +
          std::to_string(p.memory.num_alloc_retries) +
          " time(s) to serve a request; --fail-on-retry makes this a failure");
  };
}

// What the run's end says of the device (CUDA: whether the expandable segments that
// `alloc_settings` ask for took effect), what was live at each peak (CPU), and how the run
// ended, in the log.
void complete_report(
    run::RunReport& report,
    const sim::AllocatorSettings& alloc_settings,
    const memory::CudaMeter* cuda,
    const memory::CudaSegments& segments_seen,
    memory::LiveByTag* live) {
  if (cuda) {
    report.device.segments = segments_seen.segments;
    report.device.expandable_segments = segments_seen.expandable;
    report.device.alloc_conf_effect = sim::expandable_segments_effect(
        alloc_settings, segments_seen.segments, segments_seen.expandable);
    if (report.device.alloc_conf_effect.rfind("not in effect", 0) == 0)
      log::warn("allocator setting " + report.device.alloc_conf_effect);
    else if (!report.device.alloc_conf_effect.empty())
      log::info("allocator setting expandable_segments: " + report.device.alloc_conf_effect);
  }
  if (live)  // none on CUDA: the CPU meter does not see the GPU
    for (auto& p : report.phases) {
      p.live_at_peak.emplace();
      for (const auto& [tag, bytes] :
           live->live_at_peak(p.memory.name, p.memory.peak_allocated_bytes))
        p.live_at_peak->push_back({tag, bytes});
    }
  if (report.oom)
    log::error("out of memory in phase " + report.oom->phase + ": " + report.oom->message);
  if (report.device_error)
    log::error(
        "CUDA error (not out of memory) in phase " + report.device_error->phase + ": " +
        report.device_error->message);
  if (report.unsupported) {
    const std::string message = report.unsupported->message;
    log::error(
        "phase " + report.unsupported->phase + " needs " + report.unsupported->op +
        ", which cannot run on shapes alone (it has no Meta kernel, or its result depends on "
        "values): run on CPU instead (--device cpu --allocator-model cuda predicts the same "
        "card); " +
        message.substr(0, message.find('\n')));
  }
  if (report.outcome == memory::PhaseStatus::kInterrupted)
    log::warn("interrupted by a signal in phase " + report.phases.back().memory.name);
}

// Writes one output after the run: one that cannot be written is named and loses nothing
// else, and the run's outcome stands.
template <typename Write>
void write_output(
    const char* what, const std::string& path, const run::RunReport& report, Write&& write) {
  if (path.empty())
    return;
  try {
    write();
  } catch (const std::exception& e) {
    log::error(
        std::string(what) + " " + path + " not written: " + e.what() +
        "; the run's outcome stands: " + memory::to_string(report.outcome));
  }
}

// The worst case's reserved peak searched over orders of the run's steps (`steps`: the run
// recorded in memory; null without the allocator model): each phase's figure the search's
// highest, an order that runs out of memory the run's outcome.
nlohmann::json search_reserved(
    const RunRequest& args,
    const ResolvedRun& resolved,
    memory::TraceRecorder* steps,
    run::RunReport& report) {
  const ResolvedRun::WorstCase& w = *resolved.worst_case;
  if (steps == nullptr)
    return reserved_json(
        nullptr,
        "",
        "on CUDA the run's steps are not recorded: the inputs run on the device in the seed's "
        "order");
  sim::StepOrderOptions o;
  o.orders = args.orders;
  o.seed = static_cast<uint64_t>(args.seed);
  o.settings = resolved.model->settings;
  o.device = resolved.model->device;
  o.workspace_bytes = resolved.model->workspace.bytes_per_handle;
  // Train's first step makes AdamW's state: it stays first.
  o.phases.resize(2);
  o.phases[0].name = "train";
  o.phases[0].fixed = 1;
  o.phases[0].places = w.plan.train_steps_searched;
  o.phases[1].name = "evaluate";
  for (size_t k = 0; k < 2; ++k) {
    o.phases[k].repeat_steps = w.data.synthetic;
    for (const WorstCaseStep& s : w.plan.phases[k].steps)
      o.phases[k].sizes.push_back(s.positions);
  }
  const sim::StepOrderSearch search = search_step_orders(steps->take_trace(), o);
  if (!search.refused.empty()) {
    log::warn("worst case: no order searched: " + search.refused);
    return reserved_json(&search, "", "");
  }
  log::info(
      "worst case: " + std::to_string(search.orders_tried) + " orders of the steps replayed: " +
      "reserved " + memory::format_size(search.lowest.result.peak_reserved_bytes) + " .. " +
      memory::format_size(search.highest.result.peak_reserved_bytes) + " (the run's own order " +
      memory::format_size(search.recorded.result.peak_reserved_bytes) + ", highest " +
      (search.highest.how == "recorded" ? "the run's own" : search.highest.how) + ")");
  // The run took more train steps than a plain run (the longest sample's after the seed's):
  // each phase's reserved figure is the highest of the sequences of a plain run's steps.
  for (run::PhaseReport& p : report.phases)
    for (const auto& spread : search.phases)
      if (spread.name == p.memory.name)
        p.memory.peak_reserved_bytes = spread.highest_bytes;
  const auto& oom = search.highest.result.oom;
  if (oom && !report.oom) {
    for (run::PhaseReport& p : report.phases)
      if (p.memory.name == oom->phase)
        p.status = memory::PhaseStatus::kOom;
    report.outcome = memory::worst(report.outcome, memory::PhaseStatus::kOom);
    report.oom = run::OomReport{
        oom->phase,
        oom->info.requested_bytes,
        oom->info.message + " (predicted for an order of the run's steps: worst_case.reserved)"};
  }
  return reserved_json(
      &search,
      worst_case_reproduce(
          args, resolved, &search.highest.order.at(0), &search.highest.order.at(1)),
      "");
}

// --worst-case after the run: the report's worst_case section.
void complete_worst_case(
    const RunRequest& args,
    const ResolvedRun& resolved,
    memory::TraceRecorder* steps,
    bool cuda,
    run::RunReport& report) {
  const ResolvedRun::WorstCase& w = *resolved.worst_case;
  nlohmann::json reserved = nullptr;
  if (resolved.model || cuda)
    reserved = search_reserved(args, resolved, steps, report);
  report.worst_case =
      worst_case_json(w.plan, w.data, w.inputs, worst_case_reproduce(args, resolved), reserved);
}

}  // namespace

ResolvedRun resolve_run(const RunRequest& request) {
  return given([&] { return resolve_given(request); });
}

namespace {

// The run's outputs once it ended: its report (then `on_report`), trace and snapshot.
void write_outputs(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const run::RunReport& report,
    memory::MeterStack& stack,
    const std::string& trace_path,
    const std::function<void(const run::RunReport&)>& on_report) {
  memory::TraceRecorder* recorder = stack.recorder();
  memory::CudaMeter* cuda = stack.cuda();
  write_output(
      "report", args.report_file, report, [&] { run::write_report(report, args.report_file); });
  if (on_report)
    on_report(report);
  write_output("trace", trace_path, report, [&] {
    if (recorder != nullptr)
      recorder->close();
    if (!args.trace_file.empty())
      log::info(
          "trace: " + std::to_string(recorder->events()) + " events in " + args.trace_file +
          "; oomguard replay " + args.trace_file + " --card NAME predicts a GPU run");
  });
  if (!args.snapshot_file.empty() && !cuda)  // on CPU (or Meta): the trace replayed
    write_output("snapshot", args.snapshot_file, report, [&] {
      write_snapshot(trace_path, args, resolved);
    });
  if (cuda)
    write_output("snapshot", args.snapshot_file, report, [&] {
      const std::string pickle = cuda->snapshot_pickle();
      write_file_atomically(args.snapshot_file, pickle);
      log::info(
          "snapshot: PyTorch's own, recorded on " + cuda->device_name() + ", " +
          memory::format_size(static_cast<int64_t>(pickle.size())) + " in " + args.snapshot_file +
          (report.device.expandable_segments > 0
               ? std::string("; python -m torch.cuda._memory_viz trace reads it")
               : "; oomguard replay " + args.snapshot_file + " replays it"));
    });
}

}  // namespace

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

std::string worst_case_reproduce(
    const RunRequest& a,
    const ResolvedRun& resolved,
    const std::vector<size_t>* train,
    const std::vector<size_t>* evaluate) {
  const bool named = a.argv != nullptr && a.argv[0] != nullptr;
  std::string cmd =
      shell_quote(named ? a.argv[0] : "oomguard") + " run --seed " + std::to_string(a.seed);
  const auto option = [&cmd](const char* name, const std::string& value) {
    cmd += std::string(" ") + name + " " + shell_quote(value);
  };
  if (!a.config_file.empty())
    option("--config", a.config_file);
  for (const std::string& s : a.sets)
    option("--set", s);
  for (const std::string& g : a.disabled_guards)
    option("--disable-guard", g);
  for (const auto& [name, value] :
       {std::pair{"--device", a.device}, {"--card", a.card}, {"--capacity", a.capacity}})
    if (!value.empty())
      option(name, value);
  if (a.allocator_model_given || a.allocator_model != "none")
    option("--allocator-model", a.allocator_model);
  if (a.rules != "all")
    option("--rules", a.rules);
  if (a.fail_on_retry)
    cmd += " --fail-on-retry";
  if (resolved.worst_case)
    for (const std::string& s : worst_case_sets(resolved.worst_case->plan, train, evaluate))
      option("--set", s);
  return cmd;
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
