// write_pickle: plain data as a protocol-2 pickle (what --export-snapshot writes).
#include "harness/sim/pickle.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "harness/sim/pickle_opcodes.h"

namespace oomguard::sim {
namespace {

using namespace pickle_op;

void put_le(std::string& out, uint64_t v, int n) {
  for (int k = 0; k < n; ++k)
    out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

void pickle_into(std::string& out, const nlohmann::json& v) {
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
    case nlohmann::json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      out.push_back(static_cast<char>(kBinUnicode));
      put_le(out, s.size(), 4);
      out += s;
      break;
    }
    case nlohmann::json::value_t::array: {
      out.push_back(static_cast<char>(kEmptyList));
      for (size_t from = 0; from < v.size(); from += kBatch) {
        out.push_back(static_cast<char>(kMark));
        for (size_t k = from; k < std::min(v.size(), from + kBatch); ++k)
          pickle_into(out, v[k]);
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
        pickle_into(out, key);
        pickle_into(out, value);
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
  pickle_into(out, value);
  out.push_back(static_cast<char>(kStop));
  return out;
}

}  // namespace oomguard::sim
