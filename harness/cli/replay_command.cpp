#include "harness/cli/replay_command.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "harness/memory/built_torch.h"
#include "harness/cli/exit_codes.h"
#include <oomguard/memory/sizes.h>

namespace oomguard::cli {
namespace {

using app::Setting;
using memory::format_size;

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

}  // namespace

int replay_command(const ReplayArgs& args) {
  const app::Replays r = app::replay_settings(args, memory::built_torch_version().text());
  if (r.workspace_unused)
    std::fprintf(
        stderr,
        "note: %s marks no matrix product (gemm events), so no cuBLAS workspace is added; "
        "a trace recorded by this oomguard has them\n",
        args.trace_file.c_str());
  std::fprintf(
      stderr,
      "replayed %zu events %zu time(s) in %.1f ms\n",
      r.input.trace.events.size(),
      r.settings.size(),
      r.seconds * 1e3);
  const sim::ReplayResult& first = r.results.front();
  if (r.input.snapshot)
    print_recording(*r.input.snapshot, *first.recording, r.settings.front().alloc_conf);
  const char* where = r.input.snapshot ? "snapshot entry" : "trace line";
  if (r.settings.size() == 1)
    print_result(first, r.settings.front().device.driver_free_bytes, where);
  else
    print_settings(r.settings, r.results, where);
  const bool oom = std::any_of(r.results.begin(), r.results.end(), [](const sim::ReplayResult& x) {
    return x.oom.has_value();
  });
  return oom ? kExitOom : kExitPass;
}

}  // namespace oomguard::cli
