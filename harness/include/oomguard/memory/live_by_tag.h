#pragma once
// LiveByTag: the CPU meter's live bytes by tag (alloc_site.h), kept at each phase's peak, so
// a run can say what was live when a phase peaked: `live_at_peak` in the report and the log
// line of a failing phase. A phase is the site's phase; its peak starts from what was live
// when its first allocation came.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oomguard/memory/tracking_allocator.h>
#include <oomguard/sim/replay.h>

namespace oomguard::memory {

class LiveByTag final : public AllocationObserver {
 public:
  void on_alloc(int64_t id, int64_t bytes) override;
  void on_free(int64_t id) override;

  // What was live at `phase`'s peak: the five largest tags, then "(rest)", and
  // "(unattributed)" for what the meter counted at its peak (`meter_peak_bytes`) but this
  // observer did not see (allocations from before it was added). Empty for an unseen phase.
  std::vector<sim::TagBytes> live_at_peak(const std::string& phase, int64_t meter_peak_bytes) const;

 private:
  std::vector<std::string> names_;                 // tag index -> name ("" for none)
  std::unordered_map<const char*, size_t> index_;  // site tags are long-lived strings
  std::vector<int64_t> by_tag_;
  std::unordered_map<int64_t, std::pair<size_t, int64_t>> live_;  // id -> tag, bytes
  int64_t total_ = 0, peak_ = 0;
  const char* phase_ = nullptr;
  std::map<std::string, std::vector<int64_t>> peak_by_tag_;  // phase -> by_tag_ at its peak
};

// "optimizer 7.3MiB, backward 5.65MiB, ..." for a log line.
std::string describe_live(const std::vector<sim::TagBytes>& live);

}  // namespace oomguard::memory
