#include "harness/app/replay.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <sstream>

#include "harness/app/inputs.h"
#include "harness/atomic_file.h"
#include "harness/report/replay_report.h"
#include "harness/sim/pickle.h"
#include <oomguard/memory/cards.h>
#include <oomguard/memory/sizes.h>
#include <oomguard/sim/snapshot_export.h>

namespace oomguard::app {
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
report::ReplayFigures figures_of(
    const sim::ReplayResult& r, const Setting& s, const std::string& torch_version) {
  report::ReplayFigures f;
  f.card = s.card;
  f.capacity_bytes = s.device.driver_free_bytes;
  f.alloc_conf = s.alloc_conf;
  f.torch_version = torch_version;
  f.events = r.events;
  f.peak_requested_bytes = r.peak_requested_bytes;
  f.peak_allocated_bytes = r.peak_allocated_bytes;
  f.peak_reserved_bytes = r.peak_reserved_bytes;
  f.largest_gap_bytes = r.largest_gap_bytes;
  f.largest_gap_line = r.largest_gap_line;
  f.num_alloc_retries = r.num_alloc_retries;
  f.num_ooms = r.num_ooms;
  f.cublas_workspace_bytes = r.workspace_bytes;
  f.cublas_workspace = s.workspace.bytes_per_handle > 0 ? s.workspace.describe() : "";
  f.oom = oom_json(r);
  return f;
}

}  // namespace

std::string Setting::label() const {
  return (card.empty() ? format_size(device.driver_free_bytes) : card) + " " +
         (alloc_conf.empty() ? "default" : alloc_conf);
}

Input read_input(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw UsageError("trace " + path + ": cannot be opened");
  const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  return given([&] {
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

namespace {

// Every card, then every capacity, each with every allocator setting in the order given.
std::vector<Setting> settings_of(const ReplayRequest& args, const Input& input, int version) {
  const sim::GpuRules rules = rules_option(args.rules);
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
         sim::DeviceLimits::card(c.total_bytes, c.capacity_bytes()),
         "",
         {},
         workspace(c.compute_capability)});
  }
  for (const auto& text : args.capacities)
    devices.push_back(
        {"",
         sim::DeviceLimits::capacity(parse_capacity(text)),
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

// The replays of `settings`, the first one's device trace kept where a snapshot is exported.
void replay_each(const ReplayRequest& request, Replays& r, sim::DeviceTrace& device_trace) {
  const auto start = std::chrono::steady_clock::now();
  for (const Setting& s : r.settings) {
    const bool exported = !request.export_snapshot.empty() && &s == &r.settings.front();
    r.results.push_back(sim::replay(
        r.input.trace,
        s.settings,
        s.device,
        /*timeline=*/nullptr,
        exported ? &device_trace : nullptr,
        s.workspace.bytes_per_handle));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// oomguard.replay/1: every setting's figures (the first one's at the top level), the first
// replay's phases, and for a snapshot its recording match.
report::ReplayRecord replay_record(const ReplayRequest& request, const Replays& r) {
  report::ReplayRecord record;
  record.trace = request.trace_file;
  for (size_t i = 0; i < r.settings.size(); ++i)
    record.settings.push_back(figures_of(r.results[i], r.settings[i], r.torch_version));
  const sim::ReplayResult& first = r.results.front();
  for (const auto& p : first.phases)
    record.phases.push_back(
        {p.name,
         p.peak_requested_bytes,
         p.peak_allocated_bytes,
         p.peak_reserved_bytes,
         p.largest_gap_bytes,
         p.num_alloc_retries,
         p.live_at_peak});
  if (r.input.snapshot)
    record.snapshot = snapshot_json(*r.input.snapshot, *first.recording);
  return record;
}

}  // namespace

Replays replay_settings(const ReplayRequest& request, const std::string& build_torch_version) {
  if (request.cards.empty() && request.capacities.empty())
    throw UsageError("replay: give the card, --card NAME or --capacity SIZE");
  Replays r;
  r.torch_version = request.torch_version.empty() ? build_torch_version : request.torch_version;
  const int version = parse_torch_version(r.torch_version);
  for (const auto& text : request.capacities)
    parse_capacity(text);  // a bad size is named before the trace is read
  check_writable(request.report_file, "--report");
  check_writable(request.export_snapshot, "--export-snapshot");
  r.input = read_input(request.trace_file);
  r.settings = settings_of(request, r.input, version);
  if (!request.export_snapshot.empty() && r.settings.front().settings.expandable_segments)
    throw UsageError(
        "--export-snapshot: a replay with expandable_segments:True is not written as a "
        "snapshot (its pages are not segments of their own)");
  r.workspace_unused =
      r.settings.front().workspace.bytes_per_handle > 0 &&
      std::none_of(r.input.trace.events.begin(), r.input.trace.events.end(), [](const auto& e) {
        return e.op == sim::TraceEvent::Op::kGemm;
      });
  sim::DeviceTrace device_trace;
  replay_each(request, r, device_trace);
  if (!request.export_snapshot.empty())
    write_file_atomically(
        request.export_snapshot,
        sim::snapshot_pickle(
            r.input.trace,
            device_trace,
            r.settings.front().alloc_conf,
            /*expandable_segments=*/false));
  r.report = report::to_json(replay_record(request, r));
  if (!request.report_file.empty())
    write_file_atomically(request.report_file, r.report.dump(2) + "\n");
  return r;
}

}  // namespace oomguard::app
