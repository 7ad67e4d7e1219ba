#include <oomguard/memory/live_by_tag.h>

#include <numeric>

#include <oomguard/memory/alloc_site.h>
#include <oomguard/memory/sizes.h>
#include "harness/memory/operator_callbacks.h"

namespace oomguard::memory {
void LiveByTag::on_alloc(int64_t id, int64_t bytes) {
  const AllocSite site = alloc_site();
  if (site.phase != phase_ || peak_by_tag_.empty()) {
    // A new phase: its peak starts from what is live now.
    phase_ = site.phase;
    peak_ = total_;
    peak_by_tag_[phase_ == nullptr ? "" : phase_] = by_tag_;
  }
  const char* tag = allocation_tag(site);
  const auto [it, added] = index_.emplace(tag, names_.size());
  if (added) {
    names_.emplace_back(tag == nullptr ? "" : tag);
    by_tag_.push_back(0);
  }
  by_tag_[it->second] += bytes;
  live_[id] = {it->second, bytes};
  total_ += bytes;
  if (total_ > peak_) {
    peak_ = total_;
    peak_by_tag_[phase_ == nullptr ? "" : phase_] = by_tag_;
  }
}

void LiveByTag::on_free(int64_t id) {
  const auto it = live_.find(id);
  if (it == live_.end())
    return;
  by_tag_[it->second.first] -= it->second.second;
  total_ -= it->second.second;
  live_.erase(it);
}

std::vector<sim::TagBytes> LiveByTag::live_at_peak(
    const std::string& phase, int64_t meter_peak_bytes) const {
  const auto found = peak_by_tag_.find(phase);
  if (found == peak_by_tag_.end())
    return {};
  std::vector<sim::TagBytes> out = sim::top_tags(found->second, names_);
  const int64_t seen = std::accumulate(found->second.begin(), found->second.end(), int64_t{0});
  if (meter_peak_bytes > seen)
    out.push_back({"(unattributed)", meter_peak_bytes - seen});
  return out;
}

std::string describe_live(const std::vector<sim::TagBytes>& live) {
  std::string text;
  for (const auto& [tag, bytes] : live)
    text += (text.empty() ? "" : ", ") + tag + " " + format_size(bytes);
  return text;
}

}  // namespace oomguard::memory
