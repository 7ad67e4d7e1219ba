// Untagged allocations named by the operator that made them: a RecordFunction callback (no
// inputs, no outputs) keeps the outermost operator or autograd node running, and LiveByTag
// files an allocation made outside every AllocTag under "untagged: <that name>". LibTorch's
// C++ modules have no forward hooks, so a module's name is not known here: AllocTag gives it.
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

#include <ATen/record_function.h>

#include "harness/memory/operator_callbacks.h"

namespace oomguard::memory {
namespace {

std::atomic<bool> g_naming{false};
std::atomic<const char*> g_operator{""};  // the label of the outermost operator running
thread_local int t_depth = 0;             // operators this thread is inside
thread_local bool t_named = false;        // this thread's outermost one set g_operator

// Labels live as long as the process: a backward node's name is built for its call only.
const char* interned_label(const char* name) {
  // "autograd::engine::evaluate_function: AddmmBackward0" -> "AddmmBackward0"
  const char* colon = std::strstr(name, ": ");
  const std::string label =
      std::string("untagged: ") +
      (colon != nullptr && std::strncmp(name, "autograd::", 10) == 0 ? colon + 2 : name);
  static std::mutex mutex;
  static std::unordered_set<std::string> labels;  // elements never move
  std::lock_guard<std::mutex> lock(mutex);
  return labels.insert(label).first->c_str();
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (t_depth++ == 0 && g_naming.load(std::memory_order_relaxed) &&
      *g_operator.load(std::memory_order_relaxed) == '\0') {
    g_operator.store(interned_label(fn.name()), std::memory_order_relaxed);
    t_named = true;
  }
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) {
  if (t_depth > 0 && --t_depth == 0 && t_named) {
    g_operator.store("", std::memory_order_relaxed);
    t_named = false;
  }
}

}  // namespace

void name_untagged_by_operator(bool on) {
  static std::once_flag once;
  if (on)
    std::call_once(once, [] {
      at::addGlobalCallback(
          at::RecordFunctionCallback(on_start, on_end)
              .needsInputs(false)
              .needsOutputs(false)
              .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
    });
  g_naming.store(on, std::memory_order_relaxed);
}

const char* current_operator_label() {
  return g_operator.load(std::memory_order_relaxed);
}

}  // namespace oomguard::memory
