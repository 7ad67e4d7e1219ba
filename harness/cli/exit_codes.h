#pragma once
// The exit codes of DESIGN.md's contract.
namespace oomguard::cli {

constexpr int kExitPass = 0;         // every phase within budget; every repeat passed
constexpr int kExitBudget = 1;       // a phase exceeded its budget; a repeat had a failure
constexpr int kExitUsage = 2;        // bad usage or config: nothing ran
constexpr int kExitOom = 3;          // out of memory, real or emulated
constexpr int kExitInterrupted = 4;  // SIGINT or SIGTERM
constexpr int kExitDeviceError = 5;  // a CUDA error other than out-of-memory; report written

}  // namespace oomguard::cli
