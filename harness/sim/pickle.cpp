#include "harness/sim/pickle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "harness/sim/pickle_opcodes.h"

namespace oomguard::sim {
namespace {

using namespace pickle_op;
using Kind = PickleValue::Kind;

// Opcodes that build objects or call code: refused by name.
const char* code_opcode_name(uint8_t op) {
  switch (op) {
    case 'c':
      return "GLOBAL";
    case 0x93:
      return "STACK_GLOBAL";
    case 'R':
      return "REDUCE";
    case 'b':
      return "BUILD";
    case 'i':
      return "INST";
    case 'o':
      return "OBJ";
    case 0x81:
      return "NEWOBJ";
    case 0x92:
      return "NEWOBJ_EX";
    case 'P':
      return "PERSID";
    case 'Q':
      return "BINPERSID";
    case 0x82:
    case 0x83:
    case 0x84:
      return "EXT";
    default:
      return nullptr;
  }
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    size_t extra = c < 0x80           ? 0
                   : (c >> 5) == 0x6  ? 1
                   : (c >> 4) == 0xe  ? 2
                   : (c >> 3) == 0x1e ? 3
                                      : 4;
    if (extra == 4 || i + extra >= s.size() + (extra == 0 ? 1 : 0))
      return false;
    for (size_t k = 1; k <= extra; ++k)
      if ((static_cast<uint8_t>(s[i + k]) >> 6) != 0x2)
        return false;
    i += extra + 1;
  }
  return true;
}

class Reader {
 public:
  Reader(std::string_view bytes, std::deque<PickleValue>& values) : in_(bytes), values_(values) {}

  uint32_t run() {
    // #lizard forgives(length)
    // One case per opcode, each a few lines: the one function allowed past 80 lines
    // (tests/style/function_length.sh).
    while (true) {
      op_at_ = pos_;
      const uint8_t op = byte();
      switch (op) {
        case kProto:
          byte();
          break;
        case kFrame:
          take(8);
          break;
        case kStop:
          if (stack_.size() != 1 || !marks_.empty())
            fail("STOP with " + std::to_string(stack_.size()) + " values on the stack");
          return stack_.back();
        case kMark:
          marks_.push_back(stack_.size());
          break;
        case kPop:
          pop();
          break;
        case kPopMark:
          stack_.resize(mark());
          break;
        case kNone:
          push(make(Kind::kNone));
          break;
        case kNewTrue:
          push_int(Kind::kBool, 1);
          break;
        case kNewFalse:
          push_int(Kind::kBool, 0);
          break;
        case kBinInt1:
          push_int(Kind::kInt, unsigned_le(1));
          break;
        case kBinInt2:
          push_int(Kind::kInt, unsigned_le(2));
          break;
        case kBinInt:
          push_int(Kind::kInt, static_cast<int32_t>(unsigned_le(4)));
          break;
        case kLong1:
          push_long(unsigned_le(1));
          break;
        case kLong4:
          push_long(unsigned_le(4));
          break;
        case kBinFloat:
          push_float();
          break;
        case kShortBinUnicode:
          push_text(unsigned_le(1));
          break;
        case kBinUnicode:
          push_text(unsigned_le(4));
          break;
        case kBinUnicode8:
          push_text(unsigned_le(8));
          break;
        case kEmptyDict:
          push(make(Kind::kDict));
          break;
        case kEmptyList:
          push(make(Kind::kList));
          break;
        case kEmptyTuple:
          push(make(Kind::kList));
          break;
        case kTuple1:
        case kTuple2:
        case kTuple3:
          tuple_of(op - kTuple1 + 1);
          break;
        case kTuple:
        case kList:
          tuple_of(stack_.size() - mark());
          break;
        case kDict: {
          const size_t from = mark();
          const uint32_t d = make(Kind::kDict);
          add_items(d, from);
          push(d);
          break;
        }
        case kAppend:
          add_items(container(Kind::kList, 2), stack_.size() - 1);
          break;
        case kAppends: {
          const size_t from = mark();
          add_items(container_at(from, Kind::kList), from);
          break;
        }
        case kSetItem:
          add_items(container(Kind::kDict, 3), stack_.size() - 2);
          break;
        case kSetItems: {
          const size_t from = mark();
          add_items(container_at(from, Kind::kDict), from);
          break;
        }
        case kMemoize:
          memo_[static_cast<uint32_t>(memo_.size())] = top();
          break;
        case kBinPut:
          memo_[static_cast<uint32_t>(unsigned_le(1))] = top();
          break;
        case kLongBinPut:
          memo_[static_cast<uint32_t>(unsigned_le(4))] = top();
          break;
        case kBinGet:
          push(memo(unsigned_le(1)));
          break;
        case kLongBinGet:
          push(memo(unsigned_le(4)));
          break;
        case kGlobal:
          push_global();
          break;
        case kReduce:
          reduce();
          break;
        default: {
          if (const char* name = code_opcode_name(op))
            fail(
                std::string("opcode ") + name + " builds an object or runs code; a memory " +
                "snapshot holds plain data only");
          char hex[8];
          std::snprintf(hex, sizeof(hex), "0x%02x", op);
          fail(
              std::string("opcode ") + hex +
              " is not one that plain data of protocol 2 or "
              "later uses");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw PickleError(what, op_at_); }

  uint8_t byte() { return static_cast<uint8_t>(take(1)[0]); }
  std::string_view take(uint64_t n) {
    if (n > in_.size() - pos_)
      fail(
          pos_ == op_at_ ? "the pickle ends without STOP (truncated file?)"
                         : "the pickle ends inside this opcode's argument (truncated file?)");
    const std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  uint64_t unsigned_le(int n) {
    const std::string_view s = take(static_cast<uint64_t>(n));
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k)
      v = (v << 8) | static_cast<uint8_t>(s[static_cast<size_t>(k)]);
    return v;
  }
  // LONG1/LONG4: `n` bytes of little-endian two's complement, as few as Python needs: a
  // value from 2^63 to 2^64 - 1 takes 9, the last 0x00 (its sign); anything wider does not fit.
  void push_long(uint64_t n) {
    if (n == 9) {
      const uint64_t v = unsigned_le(8);
      if (byte() != 0)
        fail("an integer wider than 64 bits");
      push_int(Kind::kInt, static_cast<int64_t>(v));
      values_[stack_.back()].unsigned_64 = v >= (uint64_t{1} << 63);
      return;
    }
    if (n > 8)
      fail("an integer wider than 64 bits");
    if (n == 0) {
      push_int(Kind::kInt, 0);
      return;
    }
    const uint64_t v = unsigned_le(static_cast<int>(n));
    if (n == 8) {
      push_int(Kind::kInt, static_cast<int64_t>(v));
      return;
    }
    const uint64_t sign = uint64_t{1} << (8 * n - 1);
    push_int(Kind::kInt, static_cast<int64_t>((v ^ sign) - sign));  // sign-extends n bytes
  }

  uint32_t make(Kind kind) {
    if (values_.size() >= UINT32_MAX)
      fail("more values than a snapshot can hold");
    values_.emplace_back().kind = kind;
    return static_cast<uint32_t>(values_.size() - 1);
  }
  void push(uint32_t v) { stack_.push_back(v); }
  void push_int(Kind kind, int64_t v) {
    const uint32_t i = make(kind);
    values_[i].integer = v;
    push(i);
  }
  void push_float() {
    const uint64_t bits = [&] {
      const std::string_view s = take(8);
      uint64_t b = 0;
      for (char c : s)
        b = (b << 8) | static_cast<uint8_t>(c);  // big-endian
      return b;
    }();
    const uint32_t i = make(Kind::kFloat);
    std::memcpy(&values_[i].real, &bits, sizeof(bits));
    push(i);
  }
  void push_text(uint64_t n) {
    const std::string_view s = take(n);
    if (!valid_utf8(s))
      fail("a string that is not UTF-8");
    const uint32_t i = make(Kind::kString);
    values_[i].text = s;
    push(i);
  }
  uint32_t top() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back()))
      fail("an opcode needs a value and the stack has none");
    return stack_.back();
  }
  uint32_t pop() {
    const uint32_t v = top();
    stack_.pop_back();
    return v;
  }
  size_t mark() {
    if (marks_.empty())
      fail("an opcode needs a MARK and there is none");
    const size_t m = marks_.back();
    marks_.pop_back();
    return m;
  }
  uint32_t memo(uint64_t key) {
    const auto it = memo_.find(static_cast<uint32_t>(key));
    if (key > UINT32_MAX || it == memo_.end())
      fail("memo entry " + std::to_string(key) + " was never stored");
    return it->second;
  }
  // The container `depth` values down the stack (1 is the top), checked to be of `kind`.
  uint32_t container(Kind kind, size_t depth) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + depth)
      fail("an opcode needs more values than the stack has");
    return checked(stack_[stack_.size() - depth], kind);
  }
  uint32_t container_at(size_t mark, Kind kind) {
    if (mark == 0)
      fail("no container below the MARK");
    return checked(stack_[mark - 1], kind);
  }
  uint32_t checked(uint32_t v, Kind kind) {
    if (values_[v].kind != kind)
      fail(
          kind == Kind::kDict ? "SETITEM(S) on a value that is no dict"
                              : "APPEND(S) on a value that is no list");
    return v;
  }
  // Moves stack_[from..] into container `c` (a dict takes them as key, value pairs).
  void add_items(uint32_t c, size_t from) {
    auto& children = values_[c].children;
    if (values_[c].kind == Kind::kDict) {
      if ((stack_.size() - from) % 2 != 0)
        fail("a dict's items are not key, value pairs");
      for (size_t k = from; k < stack_.size(); k += 2) {
        const Kind key = values_[stack_[k]].kind;
        if (key != Kind::kString && key != Kind::kInt)
          fail("a dict key that is neither a string nor an integer");
      }
    }
    children.insert(children.end(), stack_.begin() + static_cast<ptrdiff_t>(from), stack_.end());
    stack_.resize(from);
  }
  void tuple_of(size_t n) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n)
      fail("a tuple of more values than the stack has");
    const uint32_t t = make(Kind::kList);
    add_items(t, stack_.size() - n);
    push(t);
  }
  void push_global() {
    std::string name;
    for (int field = 0; field < 2; ++field) {
      const size_t end = in_.find('\n', pos_);
      if (end == std::string_view::npos)
        fail("GLOBAL without its newline-terminated name");
      name += std::string(in_.substr(pos_, end - pos_)) + (field == 0 ? "." : "");
      pos_ = end + 1;
    }
    static const char* const kIdentity[] = {
        "torch.jit._pickle.build_intlist",
        "torch.jit._pickle.build_doublelist",
        "torch.jit._pickle.build_boollist",
        "torch.jit._pickle.restore_type_tag"};
    for (const char* allowed : kIdentity) {
      if (name == allowed) {
        push(make(Kind::kGlobal));
        return;
      }
    }
    fail("global " + name + " would run code; a memory snapshot holds plain data only");
  }
  void reduce() {
    const uint32_t args = pop();
    const uint32_t callable = pop();
    if (values_[callable].kind != Kind::kGlobal || values_[args].kind != Kind::kList ||
        values_[args].children.empty())
      fail("REDUCE of something other than a TorchScript identity function and its arguments");
    push(values_[args].children.front());  // each returns its first argument
  }

  std::string_view in_;
  std::deque<PickleValue>& values_;
  size_t pos_ = 0, op_at_ = 0;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
};

}  // namespace

PickleError::PickleError(const std::string& what, int64_t offset)
    : std::invalid_argument("at byte " + std::to_string(offset) + ": " + what), offset_(offset) {}

Pickle::Pickle(std::string_view bytes) {
  if (!looks_like_pickle(bytes))
    throw PickleError("not a pickle of protocol 2 or later (no PROTO opcode)", 0);
  root_ = Reader(bytes, values_).run();
}

const PickleValue* Pickle::get(const PickleValue& dict, std::string_view key) const {
  if (dict.kind != PickleValue::Kind::kDict)
    return nullptr;
  for (size_t k = 0; k + 1 < dict.children.size(); k += 2) {
    const PickleValue& name = values_[dict.children[k]];
    if (name.kind == PickleValue::Kind::kString && name.text == key)
      return &values_[dict.children[k + 1]];
  }
  return nullptr;
}

nlohmann::json Pickle::to_json(const PickleValue& value, int64_t max_values) const {
  int64_t budget = max_values;
  constexpr int kMaxDepth = 512;  // a value that holds itself would recurse for ever
  const auto convert = [&](const auto& self, const PickleValue& v, int depth) -> nlohmann::json {
    if (--budget < 0)
      throw PickleError("shared values expand to more than " + std::to_string(max_values), 0);
    if (depth > kMaxDepth)
      throw PickleError(
          "values nested deeper than " + std::to_string(kMaxDepth) + " (one that holds itself?)",
          0);
    switch (v.kind) {
      case Kind::kNone:
        return nullptr;
      case Kind::kBool:
        return v.integer != 0;
      case Kind::kInt:
        return v.unsigned_64 ? nlohmann::json(static_cast<uint64_t>(v.integer))
                             : nlohmann::json(v.integer);
      case Kind::kFloat:
        return v.real;
      case Kind::kString:
        return std::string(v.text);
      case Kind::kGlobal:
        return "<global>";  // a TorchScript identity function left without its REDUCE
      case Kind::kList: {
        nlohmann::json a = nlohmann::json::array();
        for (uint32_t c : v.children)
          a.push_back(self(self, values_[c], depth + 1));
        return a;
      }
      case Kind::kDict: {
        nlohmann::json d = nlohmann::json::object();
        for (size_t k = 0; k + 1 < v.children.size(); k += 2) {
          const PickleValue& key = values_[v.children[k]];
          d[key.kind == Kind::kString ? std::string(key.text) : std::to_string(key.integer)] =
              self(self, values_[v.children[k + 1]], depth + 1);
        }
        return d;
      }
    }
    return nullptr;
  };
  return convert(convert, value, 0);
}

bool looks_like_pickle(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<uint8_t>(bytes[0]) == kProto &&
         static_cast<uint8_t>(bytes[1]) >= 2 && static_cast<uint8_t>(bytes[1]) <= 5;
}

}  // namespace oomguard::sim
