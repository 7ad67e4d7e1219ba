#pragma once
// Checked access to the parts of a PyTorch memory snapshot that read_snapshot needs, failing
// with the file's name (SnapshotError). Used by harness/sim/snapshot.cpp alone.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "harness/sim/pickle.h"
#include <oomguard/sim/snapshot.h>

namespace oomguard::sim::snapshot_reading {

using Kind = PickleValue::Kind;

// Reads the parts of a snapshot that a replay needs, failing with the file's name.
class SnapshotReader {
 public:
  SnapshotReader(const Pickle& pickle, const std::string& source)
      : pickle_(pickle), source_(source) {}

  [[noreturn]] void fail(const std::string& why) const {
    throw SnapshotError(source_ + ": " + why);
  }
  const PickleValue& field(
      const PickleValue& dict, const char* key, Kind kind, const char* what) const {
    const PickleValue* v = pickle_.get(dict, key);
    if (v == nullptr || v->kind != kind)
      fail(
          std::string(what) + " has no " + (kind == Kind::kList ? "list" : "value") + " \"" + key +
          "\"; not a PyTorch memory snapshot?");
    return *v;
  }
  int64_t integer(const PickleValue& dict, const char* key, const char* what) const {
    return field(dict, key, Kind::kInt, what).integer;
  }
  std::string_view text(const PickleValue& dict, const char* key) const {
    const PickleValue* v = pickle_.get(dict, key);
    return v != nullptr && v->kind == Kind::kString ? v->text : std::string_view();
  }
  const PickleValue& item(const PickleValue& list, size_t i) const {
    return pickle_.at(list.children[i]);
  }

  // Where an allocation came from: the first frame outside PyTorch, as "name (file:line)".
  // What an allocation is for, from its frames: the LibTorch function of a CPU-to-GPU rule
  // (a cuBLAS workspace: "at::cuda::getNewWorkspace()"), else the first frame with a source
  // file outside PyTorch and outside its recording and allocator machinery (the user's code).
  std::string origin(const PickleValue& entry) const {
    const PickleValue* frames = pickle_.get(entry, "frames");
    if (frames == nullptr || frames->kind != Kind::kList)
      return "";
    for (uint32_t f : frames->children) {
      const std::string_view name = text(pickle_.at(f), "name");
      if (name.find("getNewWorkspace") != std::string_view::npos ||
          name.find("getCUDABlasLtWorkspace") != std::string_view::npos)
        return std::string(name);
    }
    for (uint32_t f : frames->children) {
      const PickleValue& frame = pickle_.at(f);
      const std::string_view file = text(frame, "filename");
      if (file.empty() || file == "??" || file.find("/torch/") != std::string_view::npos ||
          file == "memory_snapshot.cpp" || file == "CUDACachingAllocator.cpp")
        continue;
      const PickleValue* line = pickle_.get(frame, "line");
      // size_t(-1), PyTorch's unknown line, is read as unsigned; shown as "?".
      const bool known =
          line != nullptr && line->kind == Kind::kInt && !line->unsigned_64 && line->integer >= 0;
      const size_t slash = file.rfind('/');
      return std::string(text(frame, "name")) + " (" +
             std::string(slash == std::string_view::npos ? file : file.substr(slash + 1)) + ":" +
             (known ? std::to_string(line->integer) : std::string("?")) + ")";
    }
    return "";
  }

  void check_stream(const PickleValue& dict, const char* what) {
    const PickleValue* s = pickle_.get(dict, "stream");
    if (s == nullptr || s->kind != Kind::kInt)
      return;
    streams_.insert(s->integer);
    if (streams_.size() > 1)
      fail(
          std::string(what) + " on a second CUDA stream (" + std::to_string(*streams_.begin()) +
          " and " + std::to_string(*streams_.rbegin()) +
          "); the allocator model replays one stream");
  }

 private:
  const Pickle& pickle_;
  std::string source_;
  std::set<int64_t> streams_;
};

}  // namespace oomguard::sim::snapshot_reading
