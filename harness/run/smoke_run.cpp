#include "harness/run/smoke_run.h"

#include <optional>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include "data/text_source.h"
#include "data/tokenizer.h"
#include "harness/memory/built_torch.h"
#include "harness/atomic_file.h"
#include "harness/interrupt.h"
#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/budgets.h>
#include "harness/phases/fused_adamw.h"
#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/meta/meta_device.h>

namespace oomguard::run {
namespace {

OomReport make_oom_report(const std::string& phase, const c10::OutOfMemoryError& e) {
  std::string message = e.what_without_backtrace();
  const int64_t requested = memory::requested_bytes_from_oom_message(message);
  return {phase, requested, std::move(message)};
}

// Whether a LibTorch error message is a CUDA device's: C10_CUDA_CHECK ("CUDA error: ..."),
// TORCH_CUDABLAS_CHECK ("CUDA error: CUBLAS_STATUS_..."), cuDNN's and cuBLASLt's checks.
bool is_device_error(const std::string& message) {
  for (const char* mark :
       {"CUDA error",
        "CUBLAS_STATUS",
        "cuBLAS",
        "cuDNN",
        "CUDNN_STATUS",
        "CUDA driver error",
        "NCCL"})
    if (message.find(mark) != std::string::npos)
      return true;
  return false;
}

// Runs `body` as phase `name` inside a PhaseScope; returns false when it ended the run: an
// OOM (recorded in the report) or an interruption.
template <typename Body>
bool run_phase(
    const char* name,
    int64_t budget,
    memory::Meter& meter,
    RunReport& report,
    const RunOptions& options,
    Body&& body) {
  PhaseReport& phase = report.phases.emplace_back();
  phase.memory.name = name;
  for (const auto& rule : options.budget_rules)
    budget += rule.bytes;
  phase.budget_bytes = budget;
  // kOom or kInterrupted when the phase ended the run
  std::optional<memory::PhaseStatus> ended;
  {
    memory::set_alloc_phase(name);  // where the trace's phase starts: with the meter's peak
    memory::PhaseScope scope(meter, phase.memory);
    try {
      body(phase);
    } catch (const c10::OutOfMemoryError& e) {
      ended = memory::PhaseStatus::kOom;
      report.oom = make_oom_report(name, e);
    } catch (const Interrupted&) {
      ended = memory::PhaseStatus::kInterrupted;
    } catch (const c10::Error& e) {
      // An error of the device (an illegal access, a cuBLAS, cuDNN or driver failure;
      // LibTorch's CUDA checks name CUDA, cuBLAS, CUBLAS or cuDNN in the message) ends the run
      // here and its report says where; so does, on the Meta device, an operator that cannot
      // run on shapes alone. Anything else is a bug, and propagates.
      const std::string op = options.device.type == memory::DeviceKind::kMeta
                                 ? meta::refused_operator(e)
                                 : std::string();
      if (!op.empty()) {
        ended = memory::PhaseStatus::kUnsupported;
        report.unsupported = UnsupportedReport{name, op, e.what_without_backtrace()};
      } else if (is_device_error(e.what_without_backtrace())) {
        ended = memory::PhaseStatus::kDeviceError;
        report.device_error = OomReport{name, -1, e.what_without_backtrace()};
      } else {
        throw;
      }
    }
  }
  phase.status = ended ? *ended
                       : memory::phase_verdict(
                             phase.memory.peak_allocated_bytes,
                             budget,
                             phase.memory.num_alloc_retries,
                             options.fail_on_retry);
  report.outcome = memory::worst(report.outcome, phase.status);
  if (options.on_phase)
    options.on_phase(phase);
  return !ended.has_value();
}

}  // namespace

// Setup and the three phases; an OOM outside every phase propagates.
void run_phases(
    const RunConfig& config, memory::Meter& meter, const RunOptions& options, RunReport& report);

RunReport smoke_run(const RunConfig& config, memory::Meter& meter, const RunOptions& options) {
  RunReport report;
  report.seed = options.seed;
  report.device = options.device;
  report.capacity_bytes = options.capacity_bytes;
  report.budget_rules = options.budget_rules;
  report.config = config.resolved;
  report.guards = config.guards;
  try {
    run_phases(config, meter, options, report);
  } catch (const c10::OutOfMemoryError& e) {
    // Outside every phase: the model or the data did not fit at all.
    report.outcome = memory::worst(report.outcome, memory::PhaseStatus::kOom);
    report.oom = make_oom_report("setup", e);
  }
  return report;
}

void run_phases(
    const RunConfig& config, memory::Meter& meter, const RunOptions& options, RunReport& report) {
  memory::set_alloc_phase("setup");
  at::manual_seed(options.seed);

  data::CorpusConfig corpus = config.corpus;
  corpus.seed = options.seed;
  const std::vector<std::string> samples = config.data_file.empty()
                                               ? data::make_synthetic_corpus(corpus)
                                               : data::read_samples(config.data_file);
  // Unguarded, the collator cuts only at the model's position limit and pads to the longest.
  const data::CollatorOptions collator =
      config.guards.truncate ? data::CollatorOptions{config.max_length, /*pad_to_longest=*/false}
                             : data::CollatorOptions{config.model.max_seq_len, true};
  data::Loader train_loader(samples, config.batch_size, options.seed, collator, config.train_order);
  data::Loader eval_loader(
      samples, config.batch_size, options.seed + 1, collator, config.evaluate_order);

  models::TinyGPTConfig model_config = config.model;
  model_config.vocab_size = data::kVocabSize;
  // Made as a user's torch::nn model is: on the CPU and moved to the card; on the Meta device
  // made there (meta::MakeOnMeta), so it never exists on the CPU.
  models::TinyGPT model = [&] {
    if (options.device.type != memory::DeviceKind::kMeta)
      return models::TinyGPT(model_config);
    const meta::MakeOnMeta on_meta;
    return models::TinyGPT(model_config);
  }();
  if (options.device.type == memory::DeviceKind::kCuda)
    model->to(c10::Device(c10::kCUDA, 0));
  phases::FusedAdamW optimizer(
      model->parameters(),
      torch::optim::AdamWOptions(config.train.lr).weight_decay(config.train.weight_decay));

  // A phase that ran out of memory ends the run: later phases would start from its debris.
  const bool trained =
      run_phase("train", config.budgets.train, meter, report, options, [&](PhaseReport& p) {
        auto r = phases::train(model, optimizer, train_loader, config.train);
        p.steps = static_cast<int64_t>(r.losses.size());
        p.results["losses"] = r.losses;
        p.results["longest_batch"] = r.longest_batch;
      });
  if (!trained) {
    return;
  }
  const bool evaluated =
      run_phase("evaluate", config.budgets.evaluate, meter, report, options, [&](PhaseReport& p) {
        phases::EvaluateConfig e = config.evaluate;
        e.no_grad = config.guards.no_grad_eval;
        auto r = phases::evaluate(model, eval_loader, e);
        p.steps = r.steps;
        p.results["loss"] = r.loss;
        p.results["longest_batch"] = r.longest_batch;
      });
  if (!evaluated) {
    return;
  }
  run_phase("generate", config.budgets.generate, meter, report, options, [&](PhaseReport& p) {
    phases::GenerateConfig g = config.generate;
    g.seed = options.seed;
    g.cap_new_tokens = config.guards.max_new_tokens;
    auto r = phases::generate(model, samples, g);
    p.steps = r.steps;
    p.results["tokens_generated"] = r.tokens_generated;
    p.results["max_sequence_length"] = r.max_sequence_length;
    p.results["kv_cache_capacity"] = r.cache_capacity;
    p.results["kv_cache_bytes"] = r.cache_bytes;
    p.results["sample_tokens"] = r.sample_tokens;
  });
  // The empty_cache guard: what generation cached goes back to the device, so the next user
  // of the card (the next test in the same process) starts from the memory it needs.
  if (config.guards.empty_cache)
    meter.release_cache();
}

report::RunRecord to_record(const RunReport& report) {
  report::RunRecord r;
  r.outcome = report.outcome;
  r.seed = report.seed;
  r.device = report.device;
  r.torch_version = memory::built_torch_version_text();
  r.capacity_bytes = report.capacity_bytes;
  // Whether each guard was on; empty_cache has no effect on CPU.
  for (const GuardInfo& g : guard_table())
    r.guards[g.name] = report.guards.*g.flag;
  r.config = report.config;
  for (const PhaseReport& p : report.phases) {
    report::PhaseRecord& ph = r.phases.emplace_back();
    ph.name = p.memory.name;
    ph.status = p.status;
    ph.start_allocated_bytes = p.memory.start_allocated_bytes;
    ph.peak_allocated_bytes = p.memory.peak_allocated_bytes;
    ph.end_allocated_bytes = p.memory.end_allocated_bytes;
    ph.budget_bytes = p.budget_bytes;
    ph.peak_reserved_bytes = p.memory.peak_reserved_bytes;
    ph.predicted_peak_allocated_bytes = p.memory.predicted_peak_allocated_bytes;
    ph.num_alloc_retries = p.memory.num_alloc_retries;
    ph.steps = p.steps;
    ph.wall_seconds = p.memory.wall_seconds;
    ph.extra = p.results;
    ph.live_at_peak = p.live_at_peak;
  }
  r.budget_rules = report.budget_rules;
  r.worst_case = report.worst_case;
  if (r.worst_case.is_object() && r.worst_case.contains("seed") && r.worst_case["seed"].is_null())
    r.seed.reset();
  if (report.device_error)
    r.device_error =
        report::DeviceErrorRecord{report.device_error->phase, report.device_error->message};
  if (report.unsupported)
    r.unsupported = report::UnsupportedRecord{
        report.unsupported->phase, report.unsupported->op, report.unsupported->message};
  if (report.oom)
    r.oom = report::OomRecord{report.oom->phase, report.oom->requested_bytes, report.oom->message};
  return r;
}

double headroom_percent(const PhaseReport& p) {
  return 100.0 * static_cast<double>(p.budget_bytes - p.memory.peak_allocated_bytes) /
         static_cast<double>(p.budget_bytes);
}

void write_report(const RunReport& report, const std::string& path) {
  report::write_run_record(to_record(report), path);
}

}  // namespace oomguard::run
