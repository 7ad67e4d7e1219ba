// Fuzz target: the trace reader and the allocator model. The first byte picks the settings
// (default, expandable segments, max_split_size_mb:21 with garbage collection), the card and
// the LibTorch version (1.13 or the latest modelled); the rest is the trace. Reading gives a
// trace or TraceError naming the source; a replay keeps the model's order at every phase
// peak: reserved >= allocated >= requested.
#include <sstream>
#include <string>

#include <oomguard/sim/replay.h>
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard::sim;
  if (size == 0)
    return 0;
  static const char* kConfs[] = {
      "", "expandable_segments:True", "max_split_size_mb:21,garbage_collection_threshold:0.5"};
  // The top bit picks LibTorch 1.13's allocator (which has no expandable segments).
  const int version = data[0] & 0x80 ? 113 : kLatestModelled;
  const int conf = version == 113 && data[0] % 3 == 1 ? 0 : data[0] % 3;
  const AllocatorSettings settings = AllocatorSettings::parse(kConfs[conf], version);
  const DeviceLimits device = DeviceLimits::capacity((int64_t{1} << (20 + data[0] / 3 % 12)));
  std::istringstream in(std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  Trace trace;
  try {
    trace = read_trace(in, "fuzz.jsonl");
  } catch (const TraceError& e) {
    oomguard::fuzz::require(
        std::string(e.what()).rfind("fuzz.jsonl:", 0) == 0, "the message names the trace");
    return 0;
  }
  const ReplayResult r = replay(trace, settings, device);
  for (const auto& p : r.phases) {
    oomguard::fuzz::require(
        p.peak_reserved_bytes >= p.peak_allocated_bytes, "reserved peak >= allocated peak");
    oomguard::fuzz::require(
        p.peak_allocated_bytes >= p.peak_requested_bytes, "allocated peak >= requested peak");
  }
  // A request of 1 EiB or more is refused before any accounting, as in LibTorch: no num_ooms.
  const bool counted = r.oom && r.oom->bytes < (int64_t{1} << 60);
  oomguard::fuzz::require(r.num_ooms == (counted ? 1 : 0), "the replay stops at its first OOM");
  return 0;
}
