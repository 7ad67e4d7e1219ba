#include "harness/cli/replay_command.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>
#include <torch/version.h>

#include "harness/atomic_file.h"
#include "harness/cli/exit_codes.h"
#include "harness/app/inputs.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include "harness/sim/pickle.h"
#include <oomguard/sim/gpu_rules.h>
#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot.h>
#include <oomguard/sim/snapshot_export.h>

namespace oomguard::cli {
namespace {

using memory::format_size;

// "X.Y" as major * 100 + minor; throws UsageError otherwise.
int parse_torch_version(const std::string& text) {
  const size_t dot = text.find('.');
  const auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 3 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !digits(text.substr(0, dot)) || !digits(text.substr(dot + 1)))
    throw UsageError("--torch-version " + text + ": expected MAJOR.MINOR, e.g. 1.13 or 2.6");
  const int minor = std::stoi(text.substr(dot + 1));
  const int version = std::stoi(text.substr(0, dot)) * 100 + minor;
  if (minor > 99 || version < 113)
    throw UsageError("--torch-version " + text + ": the allocator model covers 1.13 and later");
  return version;
}

nlohmann::json snapshot_json(const sim::SnapshotInfo& info, const sim::RecordingMatch& m) {
  nlohmann::json mismatch = nullptr;
  if (m.first_mismatch)
    mismatch = {
        {"entry", m.first_mismatch->line},
        {"recorded_reserved_bytes", m.first_mismatch->recorded_reserved_bytes},
        {"modelled_reserved_bytes", m.first_mismatch->modelled_reserved_bytes}};
  return {
      {"device", info.device},
      {"entries", info.entries},
      {"recorded_alloc_conf",
       info.alloc_conf_recorded ? nlohmann::json(info.alloc_conf) : nlohmann::json(nullptr)},
      {"allocations", m.allocations},
      {"reserved_matches", m.reserved_matches},
      {"first_mismatch", mismatch}};
}

// One replay's card and allocator settings.
struct Setting {
  std::string card;  // a card profile's name, or empty for --capacity
  sim::DeviceLimits device;
  std::string alloc_conf;
  sim::AllocatorSettings settings;
  sim::CublasWorkspace workspace;  // per handle, taken at the trace's gemm events; 0: none
  std::string label() const {
    return (card.empty() ? format_size(device.driver_free_bytes) : card) + " " +
           (alloc_conf.empty() ? "default" : alloc_conf);
  }
};

nlohmann::json oom_json(const sim::ReplayResult& r) {
  if (!r.oom)
    return nullptr;
  return {
      {"line", r.oom->line},
      {"id", r.oom->id},
      {"bytes", r.oom->bytes},
      {"phase", r.oom->phase},
      {"step", r.oom->step < 0 ? nlohmann::json(nullptr) : nlohmann::json(r.oom->step)},
      {"tag", r.oom->tag},
      {"alloc_bytes", r.oom->info.alloc_bytes},
      {"largest_free_block_bytes", r.oom->info.largest_free_bytes},
      {"message", r.oom->info.message}};
}

// A replay's figures and the setting it ran with: the report's top level, and each entry of
// its `settings` list.
nlohmann::json figures_json(
    const sim::ReplayResult& r, const Setting& s, const std::string& torch_version) {
  return {
      {"card", s.card.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.card)},
      {"capacity_bytes", s.device.driver_free_bytes},
      {"alloc_conf", s.alloc_conf},
      {"torch_version", torch_version},
      {"events", r.events},
      {"peak_requested_bytes", r.peak_requested_bytes},
      {"peak_allocated_bytes", r.peak_allocated_bytes},
      {"peak_reserved_bytes", r.peak_reserved_bytes},
      {"largest_gap_bytes", r.largest_gap_bytes},
      {"largest_gap_line", r.largest_gap_line},
      {"num_alloc_retries", r.num_alloc_retries},
      {"num_ooms", r.num_ooms},
      {"cublas_workspace_bytes", r.workspace_bytes},
      {"cublas_workspace",
       s.workspace.bytes_per_handle > 0 ? nlohmann::json(s.workspace.describe())
                                        : nlohmann::json(nullptr)},
      {"outcome", r.oom ? "oom" : "pass"},
      {"margin_bytes",
       r.oom ? nlohmann::json(nullptr)
             : nlohmann::json(s.device.driver_free_bytes - r.peak_reserved_bytes)},
      {"oom", oom_json(r)}};
}

nlohmann::json to_json(
    const sim::ReplayResult& r,
    const std::string& trace_file,
    const Setting& setting,
    const std::string& torch_version) {
  nlohmann::json phases = nlohmann::json::array();
  for (const auto& p : r.phases) {
    nlohmann::json live = nlohmann::json::array();
    for (const auto& t : p.live_at_peak)
      live.push_back({{"tag", t.tag}, {"bytes", t.bytes}});
    phases.push_back(
        {{"name", p.name},
         {"peak_requested_bytes", p.peak_requested_bytes},
         {"peak_allocated_bytes", p.peak_allocated_bytes},
         {"peak_reserved_bytes", p.peak_reserved_bytes},
         {"largest_gap_bytes", p.largest_gap_bytes},
         {"num_alloc_retries", p.num_alloc_retries},
         {"live_at_peak", live}});
  }
  nlohmann::json report = {{"schema", "oomguard.replay/1"}, {"trace", trace_file}};
  report.update(figures_json(r, setting, torch_version));
  report["phases"] = phases;
  return report;
}

// `where` names a trace's position: "trace line", or "snapshot entry" (its device trace).
void print_result(const sim::ReplayResult& r, int64_t capacity, const char* where) {
  std::printf(
      "%-10s %12s %12s %12s %12s %8s\n",
      "phase",
      "requested",
      "allocated",
      "reserved",
      "largest_gap",
      "retries");
  for (const auto& p : r.phases)
    std::printf(
        "%-10s %12s %12s %12s %12s %8lld\n",
        p.name.c_str(),
        format_size(p.peak_requested_bytes).c_str(),
        format_size(p.peak_allocated_bytes).c_str(),
        format_size(p.peak_reserved_bytes).c_str(),
        format_size(p.largest_gap_bytes).c_str(),
        static_cast<long long>(p.num_alloc_retries));
  for (const auto& p : r.phases) {
    std::string line = "live at the " + p.name + " peak:";
    for (const auto& t : p.live_at_peak)
      line += (&t == &p.live_at_peak.front() ? " " : ", ") + t.tag + " " + format_size(t.bytes);
    std::printf("%s\n", line.c_str());
  }
  std::printf(
      "largest gap (reserved but unallocated): %s at %s %lld\n",
      format_size(r.largest_gap_bytes).c_str(),
      where,
      static_cast<long long>(r.largest_gap_line));
  if (r.oom) {
    const auto& o = *r.oom;
    std::printf(
        "predicted OOM at %s %lld: id %lld, %s in phase %s, step %lld, tag %s\n  %s\n"
        "largest cached free block then: %s\n",
        where,
        static_cast<long long>(o.line),
        static_cast<long long>(o.id),
        format_size(o.bytes).c_str(),
        o.phase.c_str(),
        static_cast<long long>(o.step),
        o.tag.empty() ? "(none)" : o.tag.c_str(),
        o.info.message.c_str(),
        format_size(o.info.largest_free_bytes).c_str());
    std::printf("outcome: oom\n");
  } else {
    std::printf(
        "fits: reserved peaks at %s of %s (margin %s)\noutcome: pass\n",
        format_size(r.peak_reserved_bytes).c_str(),
        format_size(capacity).c_str(),
        format_size(capacity - r.peak_reserved_bytes).c_str());
  }
}

void print_recording(
    const sim::SnapshotInfo& info, const sim::RecordingMatch& m, const std::string& conf) {
  std::printf(
      "snapshot: device %lld, %lld trace entries, replayed with %s\n",
      static_cast<long long>(info.device),
      static_cast<long long>(info.entries),
      conf.empty() ? "the default settings" : conf.c_str());
  std::printf(
      "reserved as recorded after %lld of %lld allocations",
      static_cast<long long>(m.reserved_matches),
      static_cast<long long>(m.allocations));
  if (m.first_mismatch)
    std::printf(
        "; first differs at entry %lld: recorded %s, modelled %s",
        static_cast<long long>(m.first_mismatch->line),
        format_size(m.first_mismatch->recorded_reserved_bytes).c_str(),
        format_size(m.first_mismatch->modelled_reserved_bytes).c_str());
  std::printf("\n");
}

}  // namespace

Input read_input(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw UsageError("trace " + path + ": cannot be opened");
  const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  return app::given([&] {
    Input input;
    if (sim::looks_like_pickle(bytes)) {
      input.snapshot.emplace();
      input.trace = sim::read_snapshot(bytes, path, *input.snapshot);
    } else {
      std::istringstream in(bytes);
      input.trace = sim::read_trace(in, path);
    }
    return input;
  });
}

// Every card, then every capacity, each with every allocator setting in the order given.
std::vector<Setting> settings_of(const ReplayArgs& args, const Input& input, int version) {
  const sim::GpuRules rules = app::rules_option(args.rules);
  // A trace's matrix products take the card's cuBLAS workspaces; a snapshot recorded them.
  const auto workspace = [&](int sm) {
    if (input.snapshot)
      return sim::CublasWorkspace{};
    try {
      return sim::cublas_workspace_rule(sm, {version / 100, version % 100}, rules);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  };
  std::vector<Setting> devices;
  for (const auto& name : args.cards) {
    const memory::CardProfile& c = memory::find_card(name);
    devices.push_back(
        {name,
         {c.total_bytes, c.capacity_bytes(), /*allowed_bytes=*/0},
         "",
         {},
         workspace(c.compute_capability)});
  }
  for (const auto& text : args.capacities)
    devices.push_back(
        {"",
         sim::DeviceLimits::capacity(app::parse_capacity(text)),
         "",
         {},
         workspace(memory::kDefaultModelSm)});
  // A snapshot replays with the settings it was recorded with unless told otherwise.
  std::vector<std::string> confs = args.alloc_confs;
  if (confs.empty())
    confs.push_back(input.snapshot ? input.snapshot->alloc_conf : "");
  std::vector<Setting> all;
  for (const Setting& d : devices) {
    for (const auto& conf : confs) {
      Setting s = d;
      s.alloc_conf = conf;
      try {
        s.settings = sim::AllocatorSettings::parse(conf, version);
      } catch (const std::invalid_argument& e) {
        throw UsageError(
            std::string(
                args.alloc_confs.empty() ? "the snapshot's recorded settings " + conf
                                         : "--alloc-conf " + conf) +
            ": " + e.what());
      }
      all.push_back(s);
    }
  }
  return all;
}

// One row per setting: what a reader compares to pick a setting for the card.
void print_settings(
    const std::vector<Setting>& settings,
    const std::vector<sim::ReplayResult>& results,
    const char* where) {
  size_t width = 7;
  for (const Setting& s : settings)
    width = std::max(width, s.label().size());
  const int w = static_cast<int>(width);
  std::printf(
      "%-*s %12s %12s %12s %8s  %-8s %12s\n",
      w,
      "setting",
      "allocated",
      "reserved",
      "largest_gap",
      "retries",
      "verdict",
      "margin");
  for (size_t i = 0; i < settings.size(); ++i) {
    const sim::ReplayResult& r = results[i];
    std::printf(
        "%-*s %12s %12s %12s %8lld  %-8s %12s\n",
        w,
        settings[i].label().c_str(),
        format_size(r.peak_allocated_bytes).c_str(),
        format_size(r.peak_reserved_bytes).c_str(),
        format_size(r.largest_gap_bytes).c_str(),
        static_cast<long long>(r.num_alloc_retries),
        r.oom ? "oom" : "fits",
        r.oom ? "-"
              : format_size(settings[i].device.driver_free_bytes - r.peak_reserved_bytes).c_str());
  }
  for (size_t i = 0; i < settings.size(); ++i) {
    if (const auto& o = results[i].oom)
      std::printf(
          "%s: out of memory at %s %lld, %s in phase %s%s%s\n",
          settings[i].label().c_str(),
          where,
          static_cast<long long>(o->line),
          format_size(o->bytes).c_str(),
          o->phase.c_str(),
          o->tag.empty() ? "" : ", tag ",
          o->tag.c_str());
  }
}

int replay_command(const ReplayArgs& args) {
  if (args.cards.empty() && args.capacities.empty())
    throw UsageError("replay: give the card, --card NAME or --capacity SIZE");
  const std::string torch_version =
      args.torch_version.empty()
          ? std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR)
          : args.torch_version;
  const int version = parse_torch_version(torch_version);
  for (const auto& text : args.capacities)
    app::parse_capacity(text);  // a bad size is named before the trace is read
  app::check_writable(args.report_file, "--report");
  app::check_writable(args.export_snapshot, "--export-snapshot");
  const Input input = read_input(args.trace_file);
  const std::vector<Setting> settings = settings_of(args, input, version);
  if (!args.export_snapshot.empty() && settings.front().settings.expandable_segments)
    throw UsageError(
        "--export-snapshot: a replay with expandable_segments:True is not written as a "
        "snapshot (its pages are not segments of their own)");

  if (settings.front().workspace.bytes_per_handle > 0 &&
      std::none_of(input.trace.events.begin(), input.trace.events.end(), [](const auto& e) {
        return e.op == sim::TraceEvent::Op::kGemm;
      }))
    std::fprintf(
        stderr,
        "note: %s marks no matrix product (gemm events), so no cuBLAS workspace is added; "
        "a trace recorded by this oomguard has them\n",
        args.trace_file.c_str());
  std::vector<sim::ReplayResult> results;
  nlohmann::json entries = nlohmann::json::array();
  const auto start = std::chrono::steady_clock::now();
  sim::DeviceTrace device_trace;
  for (const Setting& s : settings) {
    const bool exported = !args.export_snapshot.empty() && &s == &settings.front();
    results.push_back(sim::replay(
        input.trace,
        s.settings,
        s.device,
        /*timeline=*/nullptr,
        exported ? &device_trace : nullptr,
        s.workspace.bytes_per_handle));
    entries.push_back(figures_json(results.back(), s, torch_version));
  }
  if (!args.export_snapshot.empty())
    write_file_atomically(
        args.export_snapshot,
        sim::snapshot_pickle(
            input.trace, device_trace, settings.front().alloc_conf, /*expandable_segments=*/false));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(
      stderr,
      "replayed %zu events %zu time(s) in %.1f ms\n",
      input.trace.events.size(),
      settings.size(),
      seconds * 1e3);
  // The top level is the first setting's replay, as a single replay's report has it.
  const sim::ReplayResult& first = results.front();
  nlohmann::json report = to_json(first, args.trace_file, settings.front(), torch_version);
  report["settings"] = entries;
  if (input.snapshot) {
    report["snapshot"] = snapshot_json(*input.snapshot, *first.recording);
    print_recording(*input.snapshot, *first.recording, settings.front().alloc_conf);
  }
  if (!args.report_file.empty())
    write_file_atomically(args.report_file, report.dump(2) + "\n");
  if (settings.size() == 1)
    print_result(
        first,
        settings.front().device.driver_free_bytes,
        input.snapshot ? "snapshot entry" : "trace line");
  else
    print_settings(settings, results, input.snapshot ? "snapshot entry" : "trace line");
  const bool oom = std::any_of(
      results.begin(), results.end(), [](const sim::ReplayResult& r) { return r.oom.has_value(); });
  return oom ? kExitOom : kExitPass;
}

}  // namespace oomguard::cli
