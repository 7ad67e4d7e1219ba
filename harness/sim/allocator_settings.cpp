#include <oomguard/sim/allocator_settings.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include <oomguard/sim/alloc_conf.h>

namespace oomguard::sim {
namespace {

int64_t to_int(std::string_view v) {
  return std::stoll(std::string(v));
}

int log2_floor(int64_t n) {
  int k = 0;
  while (n > 1) {
    n >>= 1;
    ++k;
  }
  return k;
}

// "D" sets every interval; "[K1:d1,K2:d2,>:dn]" sets the interval of K MiB (sizes in
// [K, 2K) MiB) to d, every interval below the first key to d1, and ">" fills from the last
// key's interval on, that one included (as LibTorch 2.1-2.8 parse it).
void parse_divisions(std::string_view value, std::array<int64_t, kRoundupIntervals>& table) {
  if (value.front() != '[') {
    table.fill(to_int(value));
    return;
  }
  std::string_view list = value.substr(1, value.size() - 2);
  bool first = true;
  int last_index = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    const size_t colon = item.find(':');
    const std::string_view key = item.substr(0, colon);
    const int64_t d = to_int(item.substr(colon + 1));
    if (key == ">") {
      for (int i = last_index; i < kRoundupIntervals; ++i)
        table[static_cast<size_t>(i)] = d;
    } else {
      const int index = std::min(log2_floor(to_int(key)), kRoundupIntervals - 1);
      if (first) {
        for (int i = 0; i < index; ++i)
          table[static_cast<size_t>(i)] = d;
        first = false;
      }
      table[static_cast<size_t>(index)] = d;
      last_index = index;
    }
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
}

}  // namespace

AllocatorSettings AllocatorSettings::parse(std::string_view conf, int torch_version) {
  if (torch_version < 113)
    throw std::invalid_argument(
        "LibTorch " + std::to_string(torch_version / 100) + "." +
        std::to_string(torch_version % 100) + ": the allocator model covers 1.13 and later");
  validate_alloc_conf(conf, {torch_version / 100, torch_version % 100});
  AllocatorSettings s;
  s.torch_version = std::min(torch_version, kLatestModelled);
  for (const auto& [key, value] : split_alloc_conf(conf)) {
    if (key == "max_split_size_mb")
      s.max_split_size = to_int(value) * kMiB;
    else if (key == "max_non_split_rounding_mb")
      s.max_non_split_rounding = to_int(value) * kMiB;
    else if (key == "roundup_power2_divisions" && value.front() == '[' && torch_version < 201)
      throw std::invalid_argument(
          "roundup_power2_divisions:" + std::string(value) +
          ": per-size divisions need LibTorch 2.1 or later; give one number");
    else if (key == "roundup_power2_divisions")
      parse_divisions(value, s.roundup_divisions);
    else if (key == "roundup_bypass_threshold_mb")
      s.roundup_bypass_threshold = to_int(value) * kMiB;
    else if (key == "garbage_collection_threshold")
      s.garbage_collection_threshold = std::stod(std::string(value));
    else if (key == "expandable_segments")
      s.expandable_segments = value == "True";
    else if (key == "backend" && value == "cudaMallocAsync")
      throw std::invalid_argument(
          "backend:cudaMallocAsync is not modelled: the simulator follows the native caching "
          "allocator; hint: drop the backend option to predict the default allocator");
  }
  return s;
}

}  // namespace oomguard::sim
