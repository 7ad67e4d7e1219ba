#pragma once
// A reader of Python pickles that hold plain data only: what PyTorch's memory snapshots are
// (torch.cuda.memory._dump_snapshot, protocol 4; LibTorch's _memory_snapshot_pickled,
// protocol 2 from the TorchScript pickler). It runs no code: dicts, lists, tuples (read as
// lists), strings, integers, floats, booleans and None; of globals only the TorchScript
// pickler's identity functions (torch.jit._pickle build_*list, restore_type_tag).
// Values live in one arena; a value the pickle shares (its memo) is stored once, so a
// snapshot whose events share their stack frames reads in memory proportional to its size.
#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace oomguard::sim {

// A pickle that is malformed or holds more than plain data; what() names the byte offset.
class PickleError : public std::invalid_argument {
 public:
  PickleError(const std::string& what, int64_t offset);
  int64_t offset() const { return offset_; }

 private:
  int64_t offset_;
};

struct PickleValue {
  // kGlobal: one of the TorchScript pickler's identity functions, before its REDUCE.
  enum class Kind : uint8_t { kNone, kBool, kInt, kFloat, kString, kList, kDict, kGlobal };
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // kInt; kBool as 0 or 1
  // kInt: `integer` holds the bits of an unsigned value of 2^63 or more (PyTorch pickles a
  // size_t such as an unknown line, size_t(-1), as a 9-byte LONG1); a signed reader sees it
  // negative, so a size or an address that large stays refused.
  bool unsigned_64 = false;
  double real = 0.0;      // kFloat
  std::string_view text;  // kString: UTF-8, a view into the pickle's bytes
  // kList: the items; kDict: key, value, key, value, ... (indices into Pickle::values).
  std::vector<uint32_t> children;
};

class Pickle {
 public:
  // Reads `bytes`, which must outlive the Pickle (strings are views into it). Throws
  // PickleError.
  explicit Pickle(std::string_view bytes);

  const PickleValue& root() const { return values_[root_]; }
  const PickleValue& at(uint32_t index) const { return values_[index]; }
  // The value of `key` in dict `dict`, or nullptr when it has none (or is no dict).
  const PickleValue* get(const PickleValue& dict, std::string_view key) const;
  // `value` as JSON, tuples as arrays; throws PickleError when it would expand (shared
  // values copied) beyond `max_values` or nests deeper than 512 (a value holding itself).
  nlohmann::json to_json(const PickleValue& value, int64_t max_values = int64_t{1} << 24) const;

 private:
  std::deque<PickleValue> values_;
  uint32_t root_ = 0;
};

// Writes a protocol-2 pickle of plain data value by value, without building it first: what
// Python's pickle.load and Pickle read back. In a dict, each key is a value call (string)
// followed by its value.
class PickleWriter {
 public:
  PickleWriter();
  void none();
  void boolean(bool value);
  void integer(int64_t value);
  void number(double value);
  // Each distinct string is written once; repeats are memo gets.
  void string(std::string_view value);
  void begin_list();
  void begin_dict();
  // Closes the innermost list or dict. Throws std::logic_error when none is open.
  void end();
  // The pickle; throws std::logic_error while a list or dict is open.
  std::string finish();

 private:
  struct Container {
    bool dict;
    size_t in_batch;  // values since the batch's MARK
  };
  void before_value();
  void after_value();

  std::string out_;
  std::vector<Container> open_;
  std::deque<std::string> memo_strings_;  // what memo_'s keys view (a deque never moves them)
  std::unordered_map<std::string_view, uint32_t> memo_;
};

// `value` pickled (protocol 2, plain opcodes only): objects as dicts, arrays as lists; what
// Python's pickle.load and read_pickle read back.
std::string write_pickle(const nlohmann::json& value);

// Whether `bytes` starts as a pickle of protocol 2 or later does (the PROTO opcode).
bool looks_like_pickle(std::string_view bytes);

}  // namespace oomguard::sim
