#pragma once
// A replay as a PyTorch memory snapshot: what torch.cuda.memory._dump_snapshot() would have
// written had the modelled allocator run on a GPU with _record_memory_history() on, for
// PyTorch's viewer and `python -m torch.cuda._memory_viz`. Segments and blocks at the end;
// one device trace with alloc, free_requested, free_completed, segment_alloc, segment_free
// and oom entries, each with one frame naming the trace's phase (file), step (line) and tag
// (function). Addresses are the model's own.
#include <string>

#include <oomguard/sim/replay.h>
#include <oomguard/sim/trace.h>

namespace oomguard::sim {

// The snapshot pickle of `device_trace` (replay of `trace` with settings `alloc_conf`).
// Throws std::invalid_argument for a replay with expandable segments (their pages are not
// segments of their own).
std::string snapshot_pickle(
    const Trace& trace,
    const DeviceTrace& device_trace,
    const std::string& alloc_conf,
    bool expandable_segments);

}  // namespace oomguard::sim
