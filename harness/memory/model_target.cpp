#include <oomguard/memory/cards.h>
#include <oomguard/memory/modelled_meter.h>
#include <oomguard/memory/sizes.h>

namespace oomguard::memory {

std::string ModelTarget::label() const {
  std::string text = !card.empty()        ? card
                     : capacity_bytes > 0 ? format_size(capacity_bytes)
                                          : std::string("no limit");
  return alloc_conf.empty() ? text : text + " " + alloc_conf;
}

ModelTarget model_target(
    const std::string& card,
    int64_t capacity_bytes,
    const std::string& alloc_conf,
    sim::TorchVersion torch,
    const sim::GpuRules& rules) {
  ModelTarget t;
  t.card = card;
  t.alloc_conf = alloc_conf;
  t.sm = kDefaultModelSm;
  t.torch = torch;
  if (!card.empty()) {
    const CardProfile& profile = find_card(card);
    t.capacity_bytes = capacity_bytes > 0 ? capacity_bytes : profile.capacity_bytes();
    t.device = sim::DeviceLimits::card(profile.total_bytes, profile.capacity_bytes());
    t.sm = profile.compute_capability;
  } else if (capacity_bytes > 0) {
    t.capacity_bytes = capacity_bytes;
    t.device = sim::DeviceLimits::card(capacity_bytes, capacity_bytes);
  }
  t.settings = sim::AllocatorSettings::parse(alloc_conf, torch.number());
  t.workspace = sim::cublas_workspace_rule(t.sm, torch, rules);
  t.attention = rules.sdpa_attention;
  t.cpu_scratch = rules.cpu_scratch;
  return t;
}

}  // namespace oomguard::memory
