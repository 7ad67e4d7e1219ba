// write_pickle: plain data as a protocol-2 pickle (what --export-snapshot writes).
#include "harness/sim/pickle.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

#include "harness/sim/pickle_opcodes.h"

namespace oomguard::sim {
namespace {

using namespace pickle_op;

void put_le(std::string& out, uint64_t v, int n) {
  for (int k = 0; k < n; ++k)
    out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

// Each distinct string is written once and put in the memo; a repeat is a memo get (2 or 5
// bytes), as Python's pickler does. A snapshot repeats a few strings (the keys of every entry,
// actions, tags) millions of times.
using StringMemo = std::unordered_map<std::string, uint32_t>;

void put_string(std::string& out, const std::string& s, StringMemo& memo) {
  const auto found = memo.find(s);
  if (found != memo.end()) {
    if (found->second < 256) {
      out.push_back(static_cast<char>(kBinGet));
      out.push_back(static_cast<char>(found->second));
    } else {
      out.push_back(static_cast<char>(kLongBinGet));
      put_le(out, found->second, 4);
    }
    return;
  }
  out.push_back(static_cast<char>(kBinUnicode));
  put_le(out, s.size(), 4);
  out += s;
  const auto index = static_cast<uint32_t>(memo.size());
  if (index < 256) {
    out.push_back(static_cast<char>(kBinPut));
    out.push_back(static_cast<char>(index));
  } else {
    out.push_back(static_cast<char>(kLongBinPut));
    put_le(out, index, 4);
  }
  memo.emplace(s, index);
}

void pickle_into(std::string& out, const nlohmann::json& v, StringMemo& memo) {
  constexpr size_t kBatch = 1000;  // items per APPENDS / SETITEMS, as Python batches them
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      out.push_back(static_cast<char>(kNone));
      break;
    case nlohmann::json::value_t::boolean:
      out.push_back(static_cast<char>(v.get<bool>() ? kNewTrue : kNewFalse));
      break;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: {
      const auto i = v.get<int64_t>();
      if (i >= INT32_MIN && i <= INT32_MAX) {
        out.push_back(static_cast<char>(kBinInt));
        put_le(out, static_cast<uint32_t>(static_cast<int32_t>(i)), 4);
      } else {
        out.push_back(static_cast<char>(kLong1));
        out.push_back(8);
        put_le(out, static_cast<uint64_t>(i), 8);
      }
      break;
    }
    case nlohmann::json::value_t::number_float: {
      const double d = v.get<double>();
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof(bits));
      out.push_back(static_cast<char>(kBinFloat));
      for (int k = 7; k >= 0; --k)
        out.push_back(static_cast<char>((bits >> (8 * k)) & 0xff));  // big-endian
      break;
    }
    case nlohmann::json::value_t::string:
      put_string(out, v.get_ref<const std::string&>(), memo);
      break;
    case nlohmann::json::value_t::array: {
      out.push_back(static_cast<char>(kEmptyList));
      for (size_t from = 0; from < v.size(); from += kBatch) {
        out.push_back(static_cast<char>(kMark));
        for (size_t k = from; k < std::min(v.size(), from + kBatch); ++k)
          pickle_into(out, v[k], memo);
        out.push_back(static_cast<char>(kAppends));
      }
      break;
    }
    case nlohmann::json::value_t::object: {
      out.push_back(static_cast<char>(kEmptyDict));
      size_t in_batch = 0;
      for (const auto& [key, value] : v.items()) {
        if (in_batch == 0)
          out.push_back(static_cast<char>(kMark));
        put_string(out, key, memo);
        pickle_into(out, value, memo);
        if (++in_batch == kBatch) {
          out.push_back(static_cast<char>(kSetItems));
          in_batch = 0;
        }
      }
      if (in_batch > 0)
        out.push_back(static_cast<char>(kSetItems));
      break;
    }
    default:
      throw std::invalid_argument("write_pickle: binary values are not plain data");
  }
}

}  // namespace

std::string write_pickle(const nlohmann::json& value) {
  std::string out = {static_cast<char>(kProto), 2};
  StringMemo memo;
  pickle_into(out, value, memo);
  out.push_back(static_cast<char>(kStop));
  return out;
}

}  // namespace oomguard::sim
