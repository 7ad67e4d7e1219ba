#pragma once
// Allocation traces: what `oomguard run --trace FILE` writes and `oomguard replay` reads.
// JSON Lines, one event per line (DESIGN.md, "Allocation trace"):
//   {"op":"phase","phase":"train"}   a phase begins (its peaks start from here)
//   {"op":"alloc","id":17,"bytes":4096,"phase":"train","step":3,"tag":"block2.attn"}
//   {"op":"free","id":17}
//   {"op":"gemm","backward":false}   the first matrix product of the forward (backward: of
//                                    autograd's backward): on CUDA its cuBLAS handle takes a
//                                    workspace there (sim::cublas_workspace)
#include <cstdint>
#include <istream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <oomguard/sim/caching_allocator.h>

namespace oomguard::sim {

struct TraceEvent {
  // kEmptyCache: torch.cuda.empty_cache() (PyTorch snapshots; oomguard's traces have none).
  // kGemm: a cuBLAS handle's first use (`backward`: autograd's thread's; oomguard's traces).
  enum class Op : uint8_t { kAlloc, kFree, kPhase, kEmptyCache, kGemm };
  Op op = Op::kAlloc;
  int32_t phase = 0;      // index into Trace::phases (alloc and phase events)
  int32_t tag = 0;        // index into Trace::tags (alloc events)
  int32_t slot = 0;       // dense number of the allocation (alloc and free events)
  int64_t bytes = 0;      // alloc events
  int64_t step = -1;      // alloc events; -1 when the trace gives none
  int64_t id = 0;         // the trace's own id (alloc and free events)
  int64_t line = 0;       // where in the file (a snapshot: the entry of its device trace, from 1)
  bool backward = false;  // gemm events: autograd's backward thread's handle

  // Events of each kind, from line `line`; the fields a kind does not use keep their defaults.
  // Phase `phase` begins.
  static TraceEvent phase_start(int32_t phase, int64_t line) {
    TraceEvent e;
    e.op = Op::kPhase;
    e.phase = phase;
    e.line = line;
    return e;
  }
  // Allocation number `slot`: `bytes` under the trace's `id`, in `phase`, with `tag` and `step`.
  static TraceEvent alloc(
      int32_t slot,
      int64_t bytes,
      int64_t id,
      int32_t phase,
      int32_t tag,
      int64_t step,
      int64_t line) {
    TraceEvent e;
    e.op = Op::kAlloc;
    e.slot = slot;
    e.bytes = bytes;
    e.id = id;
    e.phase = phase;
    e.tag = tag;
    e.step = step;
    e.line = line;
    return e;
  }
  // Allocation number `slot` (the trace's `id`) is freed.
  static TraceEvent free(int32_t slot, int64_t id, int64_t line) {
    TraceEvent e;
    e.op = Op::kFree;
    e.slot = slot;
    e.id = id;
    e.line = line;
    return e;
  }
  // torch.cuda.empty_cache().
  static TraceEvent empty_cache(int64_t line) {
    TraceEvent e;
    e.op = Op::kEmptyCache;
    e.line = line;
    return e;
  }
  // The first matrix product on autograd's backward thread (`backward`) or the forward's.
  static TraceEvent gemm(bool backward, int64_t line) {
    TraceEvent e;
    e.op = Op::kGemm;
    e.backward = backward;
    e.line = line;
    return e;
  }
};

// A segment held before the trace's first event (a PyTorch snapshot whose recording began
// mid-run) and the slots of the blocks live in it then.
struct InitialSegment {
  int64_t address = 0, size = 0;
  bool small = false;
  std::vector<AdoptedBlock> live;  // in address order
  std::vector<int32_t> slots;      // live[i] is slot slots[i]
};

struct Trace {
  std::vector<TraceEvent> events;
  std::vector<std::string> phases;  // names, in order of first use
  std::vector<std::string> tags;    // tags[0] is "" (none given)
  int32_t slots = 0;                // allocations in all
  // Snapshots only: the allocator's state when recording began, and per event the reserved
  // bytes the recording held after it (its segment_alloc / segment_free timeline).
  std::vector<InitialSegment> initial_segments;
  std::vector<int64_t> recorded_reserved;
};

// A malformed trace: `what()` names the source, the line and what is wrong.
class TraceError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Reads a whole trace. An alloc whose phase differs from the current one starts that phase
// (traces written by hand need no phase events). Throws TraceError for a line that is not
// such an event, a negative size, an id allocated twice while live, or a free of an id that
// is not live.
Trace read_trace(std::istream& in, const std::string& source);

// One line of the format, without the newline; `tag` and `phase` are escaped as JSON.
std::string alloc_line(
    int64_t id, int64_t bytes, std::string_view phase, int64_t step, std::string_view tag);
// {"op":"free","id":ID}
std::string free_line(int64_t id);
// {"op":"phase","phase":PHASE}: the allocations after it belong to that phase.
std::string phase_line(std::string_view phase);
// {"op":"gemm","backward":BOOL}: the first matrix product on that thread.
std::string gemm_line(bool backward);

}  // namespace oomguard::sim
