#pragma once
// `oomguard run --worst-case` as a run takes it: the plan of its data's worst inputs
// (harness/app/worst_case.h) made and the config made to take them, and after the run the
// reserved peak searched over orders of its steps (sim::search_step_orders) and the report's
// worst_case section. Used by harness/app/run.cpp.
#include <string>
#include <vector>

#include "harness/app/run.h"

namespace oomguard::memory {
class TraceRecorder;
}  // namespace oomguard::memory

namespace oomguard::app {

// --worst-case: the plan, and the run's config made to take its inputs (the report's config
// stays the one asked for; its worst_case section says what ran). `file_samples`: the data
// file's samples, empty for the synthetic corpus. Throws UsageError.
void resolve_worst_case(
    const RunRequest& args, ResolvedRun& resolved, const std::vector<std::string>& file_samples);

// --worst-case after the run: the report's worst_case section, with the reserved peak searched
// over orders of the run's steps (`steps`: the run recorded in memory; null without the
// allocator model) where the model or a `cuda` device gives reserved figures.
void complete_worst_case(
    const RunRequest& args,
    const ResolvedRun& resolved,
    memory::TraceRecorder* steps,
    bool cuda,
    run::RunReport& report);

}  // namespace oomguard::app
