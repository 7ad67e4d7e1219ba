// Fuzz target: the pickle reader and the snapshot import. Any input gives a snapshot's trace
// or a SnapshotError naming the file (a malformed pickle also the byte offset); it never
// runs code, crashes or reads out of bounds. A trace that reads replays through the model,
// whose reserved peak stays at or above its allocated peak.
#include <string>
#include <string_view>

#include <oomguard/sim/replay.h>
#include <oomguard/sim/snapshot.h>
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard::sim;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  SnapshotInfo info;
  Trace trace;
  try {
    trace = read_snapshot(bytes, "fuzz.pickle", info);
  } catch (const SnapshotError& e) {
    oomguard::fuzz::require(
        std::string(e.what()).rfind("fuzz.pickle: ", 0) == 0, "the message names the file");
    return 0;
  }
  oomguard::fuzz::require(
      trace.recorded_reserved.size() == trace.events.size(), "a recorded reserved per event");
  const ReplayResult r =
      replay(trace, AllocatorSettings{}, DeviceLimits::capacity(int64_t{1} << 34));
  for (const auto& p : r.phases)
    oomguard::fuzz::require(
        p.peak_reserved_bytes >= p.peak_allocated_bytes, "reserved peak >= allocated peak");
  return 0;
}
