#pragma once
// The operator callbacks (RecordFunction) that the allocator model (ModelledMeter) and the
// trace recorder share: registered once per process, they do nothing while neither watches.
namespace oomguard::memory {

class TraceRecorder;

// From now on `recorder` hears of every matrix product's end (the last one set does).
void watch_gemms_for(TraceRecorder* recorder);
// `recorder` hears of none from now on; waits for a callback using it.
void unwatch_gemms_for(TraceRecorder* recorder);

}  // namespace oomguard::memory
