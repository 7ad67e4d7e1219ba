#include <oomguard/memory/alloc_site.h>

#include <atomic>

namespace oomguard::memory {
namespace {

std::atomic<const char*> g_phase{"setup"};
std::atomic<int64_t> g_step{-1};
std::atomic<const char*> g_tag{""};

}  // namespace

AllocSite alloc_site() {
  return {
      g_phase.load(std::memory_order_relaxed),
      g_step.load(std::memory_order_relaxed),
      g_tag.load(std::memory_order_relaxed)};
}

void set_alloc_phase(const char* phase) {
  g_phase.store(phase, std::memory_order_relaxed);
  g_step.store(-1, std::memory_order_relaxed);
}

void set_alloc_step(int64_t step) {
  g_step.store(step, std::memory_order_relaxed);
}

AllocTag::AllocTag(const char* tag) : previous_(g_tag.exchange(tag, std::memory_order_relaxed)) {}

AllocTag::~AllocTag() {
  g_tag.store(previous_, std::memory_order_relaxed);
}

}  // namespace oomguard::memory
