// PickleWriter and write_pickle: plain data as a protocol-2 pickle (what --export-snapshot
// writes), as Python's pickler lays it out: lists and dicts filled in batches of 1000
// (MARK ... APPENDS / SETITEMS), each distinct string written once and fetched from the memo
// after.
#include "harness/sim/pickle.h"

#include <cstring>
#include <stdexcept>

#include "harness/sim/pickle_opcodes.h"

namespace oomguard::sim {
namespace {

using namespace pickle_op;

constexpr size_t kBatch = 1000;  // items per APPENDS, pairs per SETITEMS

void put_le(std::string& out, uint64_t v, int n) {
  for (int k = 0; k < n; ++k)
    out.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

void put_memo_index(std::string& out, Op short_form, Op long_form, uint32_t index) {
  if (index < 256) {
    out.push_back(static_cast<char>(short_form));
    out.push_back(static_cast<char>(index));
  } else {
    out.push_back(static_cast<char>(long_form));
    put_le(out, index, 4);
  }
}

}  // namespace

PickleWriter::PickleWriter() : out_{static_cast<char>(kProto), 2} {}

void PickleWriter::before_value() {
  if (!open_.empty() && open_.back().in_batch == 0)
    out_.push_back(static_cast<char>(kMark));
}

void PickleWriter::after_value() {
  if (open_.empty())
    return;
  Container& c = open_.back();
  // A dict's batch counts keys and values: kBatch pairs.
  if (++c.in_batch == (c.dict ? 2 * kBatch : kBatch)) {
    out_.push_back(static_cast<char>(c.dict ? kSetItems : kAppends));
    c.in_batch = 0;
  }
}

void PickleWriter::none() {
  before_value();
  out_.push_back(static_cast<char>(kNone));
  after_value();
}

void PickleWriter::boolean(bool value) {
  before_value();
  out_.push_back(static_cast<char>(value ? kNewTrue : kNewFalse));
  after_value();
}

void PickleWriter::integer(int64_t value) {
  before_value();
  if (value >= INT32_MIN && value <= INT32_MAX) {
    out_.push_back(static_cast<char>(kBinInt));
    put_le(out_, static_cast<uint32_t>(static_cast<int32_t>(value)), 4);
  } else {
    out_.push_back(static_cast<char>(kLong1));
    out_.push_back(8);
    put_le(out_, static_cast<uint64_t>(value), 8);
  }
  after_value();
}

void PickleWriter::number(double value) {
  before_value();
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  out_.push_back(static_cast<char>(kBinFloat));
  for (int k = 7; k >= 0; --k)
    out_.push_back(static_cast<char>((bits >> (8 * k)) & 0xff));  // big-endian
  after_value();
}

void PickleWriter::string(std::string_view value) {
  before_value();
  const auto found = memo_.find(value);
  if (found != memo_.end()) {
    put_memo_index(out_, kBinGet, kLongBinGet, found->second);
  } else {
    out_.push_back(static_cast<char>(kBinUnicode));
    put_le(out_, value.size(), 4);
    out_.append(value);
    const auto index = static_cast<uint32_t>(memo_.size());
    put_memo_index(out_, kBinPut, kLongBinPut, index);
    memo_.emplace(memo_strings_.emplace_back(value), index);
  }
  after_value();
}

void PickleWriter::begin_list() {
  before_value();
  out_.push_back(static_cast<char>(kEmptyList));
  open_.push_back({/*dict=*/false, 0});
}

void PickleWriter::begin_dict() {
  before_value();
  out_.push_back(static_cast<char>(kEmptyDict));
  open_.push_back({/*dict=*/true, 0});
}

void PickleWriter::end() {
  if (open_.empty())
    throw std::logic_error("PickleWriter::end without an open list or dict");
  const Container c = open_.back();
  if (c.dict && c.in_batch % 2 != 0)
    throw std::logic_error("PickleWriter::end of a dict with a key and no value");
  if (c.in_batch > 0)
    out_.push_back(static_cast<char>(c.dict ? kSetItems : kAppends));
  open_.pop_back();
  after_value();
}

std::string PickleWriter::finish() {
  if (!open_.empty())
    throw std::logic_error("PickleWriter::finish with a list or dict still open");
  out_.push_back(static_cast<char>(kStop));
  return std::move(out_);
}

namespace {

void write_json(PickleWriter& w, const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      w.none();
      break;
    case nlohmann::json::value_t::boolean:
      w.boolean(v.get<bool>());
      break;
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      w.integer(v.get<int64_t>());
      break;
    case nlohmann::json::value_t::number_float:
      w.number(v.get<double>());
      break;
    case nlohmann::json::value_t::string:
      w.string(v.get_ref<const std::string&>());
      break;
    case nlohmann::json::value_t::array:
      w.begin_list();
      for (const auto& item : v)
        write_json(w, item);
      w.end();
      break;
    case nlohmann::json::value_t::object:
      w.begin_dict();
      for (const auto& [key, value] : v.items()) {
        w.string(key);
        write_json(w, value);
      }
      w.end();
      break;
    default:
      throw std::invalid_argument("write_pickle: binary values are not plain data");
  }
}

}  // namespace

std::string write_pickle(const nlohmann::json& value) {
  PickleWriter w;
  write_json(w, value);
  return w.finish();
}

}  // namespace oomguard::sim
