// Untagged allocations named by the operator that made them: a RecordFunction callback (no
// inputs, no outputs) keeps the outermost operator or autograd node running on each thread,
// and an allocation made outside every AllocTag is filed under "untagged: <that name>"
// (LiveByTag, the trace). LibTorch's C++ modules have no forward hooks, so a module's name is
// not known here: AllocTag gives it.
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include "harness/memory/operator_callbacks.h"

namespace oomguard::memory {
namespace {

// This thread's outermost operator, and the last one any thread began (for intra-op worker
// threads, which run no operator of their own while they allocate for one).
thread_local const char* t_label = "";
thread_local int t_depth = 0;
std::atomic<const char*> g_label{""};

// Labels live as long as the process (a backward node's name is built for its call only);
// never destroyed, so a callback during static teardown finds them.
const char* interned_label(const char* name) {
  static auto* mutex = new std::mutex;
  static auto* labels = new std::unordered_set<std::string>;  // elements never move
  // "autograd::engine::evaluate_function: AddmmBackward0" -> "AddmmBackward0"
  const char* colon = std::strstr(name, ": ");
  const bool node = colon != nullptr && std::strncmp(name, "autograd::", 10) == 0;
  std::string label = std::string("untagged: ") + (node ? colon + 2 : name);
  std::lock_guard<std::mutex> lock(*mutex);
  return labels->insert(std::move(label)).first->c_str();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (t_depth++ == 0) {
    t_label = interned_label(fn.name());
    g_label.store(t_label, std::memory_order_release);
  }
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (t_depth > 0 && --t_depth == 0)
    t_label = "";
}

std::mutex g_switch;            // guards the two below
int g_users = 0;                // name_untagged_by_operator(true) not yet undone
at::CallbackHandle g_handle{};  // the registered callback while g_users > 0

}  // namespace

void name_untagged_by_operator(bool on) {
  std::lock_guard<std::mutex> lock(g_switch);
  if (on && g_users++ == 0) {
    g_handle = at::addGlobalCallback(
        at::RecordFunctionCallback(on_start, on_end)
            .needsInputs(false)
            .needsOutputs(false)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  } else if (!on && g_users > 0 && --g_users == 0) {
    // Operators already running keep the callbacks they started with, so their ends still
    // come; later ones run without it (and without its cost).
    at::removeCallback(g_handle);
    t_depth = 0;
    t_label = "";
    g_label.store("", std::memory_order_release);
  }
}

const char* current_operator_label() {
  if (*t_label != '\0')
    return t_label;
  return at::in_parallel_region() ? g_label.load(std::memory_order_acquire) : "";
}

}  // namespace oomguard::memory
