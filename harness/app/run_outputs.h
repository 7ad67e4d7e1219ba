#pragma once
// What a run says and leaves behind: its start and each phase's end in the log, the report
// completed from its meters once it ended, and its outputs written (report, trace, snapshot).
// Used by harness/app/run.cpp.
#include <cstdint>
#include <functional>
#include <string>

#include "harness/app/run.h"
#include <oomguard/memory/cuda_meter.h>
#include <oomguard/memory/live_by_tag.h>
#include <oomguard/memory/meter_stack.h>
#include <oomguard/sim/allocator_settings.h>

namespace oomguard::app {

// What the run is about to do: the card, its emulation on a bigger GPU, the run's settings.
void log_start(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const run::RunOptions& options,
    const memory::CudaMeter* cuda);

// The [mem] line of each phase as it ends, what was live at a failed phase's peak, and a
// near-OOM's warning; on CUDA it also keeps the phase end at which the allocator held the
// most segments.
std::function<void(const run::PhaseReport&)> phase_logger(
    int64_t capacity,
    memory::LiveByTag* live,
    memory::CudaMeter* cuda,
    memory::CudaSegments& segments_seen);

// What the run's end says of the device (CUDA: whether the expandable segments that
// `alloc_settings` ask for took effect), what was live at each peak (CPU), and how the run
// ended, in the log.
void complete_report(
    run::RunReport& report,
    const sim::AllocatorSettings& alloc_settings,
    const memory::CudaMeter* cuda,
    const memory::CudaSegments& segments_seen,
    memory::LiveByTag* live);

// The run's outputs once it ended: its report (then `on_report`), trace and snapshot. One that
// cannot be written is logged as an error and loses nothing else; the run's outcome stands.
void write_outputs(
    const RunRequest& args,
    const ResolvedRun& resolved,
    const run::RunReport& report,
    memory::MeterStack& stack,
    const std::string& trace_path,
    const std::function<void(const run::RunReport&)>& on_report);

}  // namespace oomguard::app
