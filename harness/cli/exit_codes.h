#pragma once
// The exit codes of DESIGN.md's contract ("Exit codes"), and the one mapping from a run's
// outcome to its code. Every command returns one of these; cli_main() alone turns exceptions
// into them: UsageError into kExitUsage, anything else into kExitInternal.
#include <oomguard/memory/budgets.h>

namespace oomguard::cli {

constexpr int kExitPass = 0;         // every phase within budget; every repeat passed
constexpr int kExitBudget = 1;       // a phase exceeded its budget; a repeat had a failure
constexpr int kExitUsage = 2;        // bad usage or config: nothing ran
constexpr int kExitOom = 3;          // out of memory, real or emulated
constexpr int kExitInterrupted = 4;  // SIGINT or SIGTERM
constexpr int kExitDeviceError = 5;  // a CUDA error other than out-of-memory; report written
// oomguard could not go on for a reason that is not the input's: a process it cannot start,
// a file it cannot read back, a fault of its own. One line on stderr names it.
constexpr int kExitInternal = 6;
// On the Meta device, an operator without a Meta kernel, or whose output's shape depends on
// values: outcome unsupported, the report written naming the operator and the phase.
constexpr int kExitUnsupported = 7;

// The code of a run that ended with `outcome`. A file the run could not write afterwards
// (report, trace, snapshot) does not change it: that failure is reported on its own.
constexpr int exit_code(memory::PhaseStatus outcome) {
  switch (outcome) {
    case memory::PhaseStatus::kPass:
    case memory::PhaseStatus::kNotRun:
      return kExitPass;
    case memory::PhaseStatus::kNearOom:
    case memory::PhaseStatus::kBudgetExceeded:
    case memory::PhaseStatus::kError:
      return kExitBudget;
    case memory::PhaseStatus::kOom:
      return kExitOom;
    case memory::PhaseStatus::kInterrupted:
      return kExitInterrupted;
    case memory::PhaseStatus::kDeviceError:
      return kExitDeviceError;
    case memory::PhaseStatus::kUnsupported:
      return kExitUnsupported;
  }
  return kExitInternal;
}

}  // namespace oomguard::cli
