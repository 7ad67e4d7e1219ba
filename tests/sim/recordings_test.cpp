// Real GPU recordings (PyTorch memory snapshots that others made on real cards) in the folder
// OOMGUARD_SNAPSHOTS names; the suite points it at ../shared/snapshots/, whose README says
// which card family each came from. Skipped, saying so, where it is unset or absent.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <oomguard/sim/gpu_rules.h>
#include <oomguard/sim/snapshot.h>

namespace oomguard::sim {
namespace {

struct Recording {
  const char* file;
  int sm;                   // the card family: any pre-Hopper card shares sm80's rule
  int workspaces_recorded;  // workspace allocations in its device trace
};

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(RealRecordings, TheirCublasWorkspacesAreWhatTheRulePredicts) {
  const char* dir = std::getenv("OOMGUARD_SNAPSHOTS");
  if (dir == nullptr || *dir == '\0')
    GTEST_SKIP() << "OOMGUARD_SNAPSHOTS is unset: no real recordings to check against";
  const Recording recordings[] = {
      {"eor_nn_pre_hopper.pickle", 80, 1},  // one workspace, allocated while recording
      {"fullstep_hopper.pickle", 90, 1},    // two live at the end, one from before recording
  };
  for (const Recording& r : recordings) {
    const std::string path = std::string(dir) + "/" + r.file;
    if (!std::ifstream(path).good())
      GTEST_SKIP() << path << " is absent: no real recordings to check against";
    const std::string bytes = read_file(path);
    SnapshotInfo info;
    const Trace trace = read_snapshot(bytes, path, info);
    // LibTorch 1.13 to 2.15 agree on these two architectures' default.
    const int64_t predicted = cublas_workspace(r.sm, {2, 15}, "", 1).bytes_per_handle;
    int workspaces = 0;
    for (const TraceEvent& e : trace.events) {
      if (e.op != TraceEvent::Op::kAlloc || trace.tags[e.tag] != "at::cuda::getNewWorkspace()")
        continue;
      ++workspaces;
      EXPECT_EQ(e.bytes, predicted) << r.file << ": entry " << e.line;
    }
    EXPECT_EQ(workspaces, r.workspaces_recorded) << r.file;
    EXPECT_LE(workspaces, kTrainingCublasHandles) << r.file;
  }
}

}  // namespace
}  // namespace oomguard::sim
