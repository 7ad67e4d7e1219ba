#include "harness/interrupt.h"

#include <atomic>
#include <csignal>

namespace oomguard {
namespace {

std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void on_signal(int /*signal*/) {
  requested.store(true);
}

}  // namespace

void install_interrupt_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = 0;  // no SA_RESTART: a blocking wait returns EINTR and sees the flag
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

bool interrupt_requested() {
  return requested.load();
}

void request_interrupt() {
  requested.store(true);
}

void clear_interrupt() {
  requested.store(false);
}

void throw_if_interrupted() {
  if (requested.load()) {
    throw Interrupted();
  }
}

}  // namespace oomguard
