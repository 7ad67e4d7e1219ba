#pragma once
// Interruption: SIGINT or SIGTERM sets a flag; the phases check it between steps and end the
// run by throwing Interrupted, so the report is still written (outcome "interrupted").
#include <stdexcept>

namespace oomguard {

struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted by a signal") {}
};

// Handlers for SIGINT and SIGTERM that set the flag (more signals change nothing: a run
// asked twice still ends at its next step, with its report).
void install_interrupt_handlers();
bool interrupt_requested();
// Sets the flag as a signal would (tests; repeat, when it stops starting runs).
void request_interrupt();
void clear_interrupt();
// Throws Interrupted when the flag is set: called between steps.
void throw_if_interrupted();

}  // namespace oomguard
