#include "harness/app/run_outputs.h"

#include <cstdio>
#include <exception>

#include <ATen/Parallel.h>

#include "harness/app/run_snapshot.h"
#include "harness/atomic_file.h"
#include "harness/log.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/alloc_conf.h>

namespace oomguard::app {
namespace {

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

// The device the snapshot's replay emulates: the allocator model's card, else the capacity.
sim::DeviceLimits snapshot_device(const ResolvedRun& resolved) {
  sim::DeviceLimits device = resolved.model ? resolved.model->device : sim::DeviceLimits{};
  if (device.total_bytes == 0 && resolved.capacity_bytes > 0)
    device = sim::DeviceLimits::capacity(resolved.capacity_bytes);
  return device;
}

}  // namespace

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
      ", train precision " + phases::precision_name(resolved.config.train.precision) +
      ", guards off: " + disabled_guards(resolved.config.guards) +
      (options.device.alloc_conf.empty() ? std::string()
                                         : ", alloc_conf " + options.device.alloc_conf + " (" +
                                               options.device.alloc_conf_source + ")"));
}

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
      write_snapshot(
          trace_path,
          /*keep_trace=*/!args.trace_file.empty(),
          args.snapshot_file,
          *resolved.snapshot,
          snapshot_device(resolved));
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

}  // namespace oomguard::app
