#include <oomguard/sim/alloc_conf.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace oomguard::sim {
namespace {

bool is_integer(std::string_view v) {
  if (v.empty() || v.size() > 9)
    return false;
  for (char c : v)
    if (c < '0' || c > '9')
      return false;
  return true;
}
int64_t to_integer(std::string_view v) {
  return std::stoll(std::string(v));
}
bool power_of_two_or_zero(int64_t n) {
  return n >= 0 && (n & (n - 1)) == 0;
}
int log2_floor(int64_t n) {
  int k = 0;
  while (n > 1) {
    n >>= 1;
    ++k;
  }
  return k;
}

// Each option checks its value and, where it is valid, writes it into the settings; false for
// a value the allocator would refuse.
using Fill = bool (*)(std::string_view value, TorchVersion torch, AllocatorSettings& s);

bool true_or_false(std::string_view v, bool& out) {
  if (v != "True" && v != "False")
    return false;
  out = v == "True";
  return true;
}
bool mib_over_20(std::string_view v, int64_t& out) {
  if (!is_integer(v) || to_integer(v) <= 20)
    return false;
  out = to_integer(v) * kMiB;
  return true;
}

bool fill_max_split(std::string_view v, TorchVersion, AllocatorSettings& s) {
  return mib_over_20(v, s.max_split_size);
}
bool fill_max_non_split_rounding(std::string_view v, TorchVersion, AllocatorSettings& s) {
  return mib_over_20(v, s.max_non_split_rounding);
}
bool fill_bypass_threshold(std::string_view v, TorchVersion, AllocatorSettings& s) {
  if (!is_integer(v))
    return false;
  s.roundup_bypass_threshold = to_integer(v) * kMiB;
  return true;
}
bool fill_gc_threshold(std::string_view v, TorchVersion, AllocatorSettings& s) {
  try {
    size_t used = 0;
    const double x = std::stod(std::string(v), &used);
    if (used != v.size() || !(x > 0.0 && x < 1.0))
      return false;
    s.garbage_collection_threshold = x;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}
bool fill_expandable(std::string_view v, TorchVersion, AllocatorSettings& s) {
  return true_or_false(v, s.expandable_segments);
}
bool fill_backend(std::string_view v, TorchVersion, AllocatorSettings& s) {
  if (v != "native" && v != "cudaMallocAsync")
    return false;
  s.cuda_malloc_async = v == "cudaMallocAsync";
  return true;
}
// Options without effect on device memory: checked, not kept.
bool check_boolean(std::string_view v, TorchVersion, AllocatorSettings&) {
  bool ignored = false;
  return true_or_false(v, ignored);
}
bool check_register_threads(std::string_view v, TorchVersion, AllocatorSettings&) {
  return is_integer(v) && to_integer(v) >= 1 && to_integer(v) <= 128 &&
         power_of_two_or_zero(to_integer(v));
}

// "D" sets every interval; "[K1:d1,K2:d2,>:dn]" (LibTorch 2.1+) sets the interval of K MiB
// (sizes in [K, 2K) MiB) to d, every interval below the first key to d1, and ">" fills from
// the last key's interval on, that one included (as LibTorch 2.1-2.8 parse it). K is a power
// of two; each d zero or a power of two.
bool fill_divisions(std::string_view v, TorchVersion torch, AllocatorSettings& s) {
  auto& table = s.roundup_divisions;
  if (is_integer(v)) {
    if (!power_of_two_or_zero(to_integer(v)))
      return false;
    table.fill(to_integer(v));
    return true;
  }
  if (v.size() < 2 || v.front() != '[' || v.back() != ']')
    return false;
  if (torch.number() < 201)
    throw std::invalid_argument(
        "roundup_power2_divisions:" + std::string(v) +
        ": per-size divisions need LibTorch 2.1 or later; give one number");
  std::string_view list = v.substr(1, v.size() - 2);
  bool first = true;
  int last_index = 0;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return false;
    const std::string_view key = item.substr(0, colon), d = item.substr(colon + 1);
    if (!is_integer(d) || !power_of_two_or_zero(to_integer(d)))
      return false;
    if (key == ">") {
      for (int i = last_index; i < kRoundupIntervals; ++i)
        table[static_cast<size_t>(i)] = to_integer(d);
      continue;
    }
    if (!is_integer(key) || to_integer(key) == 0 || !power_of_two_or_zero(to_integer(key)))
      return false;
    const int index = std::min(log2_floor(to_integer(key)), kRoundupIntervals - 1);
    for (int i = first ? 0 : index; i <= index; ++i)
      table[static_cast<size_t>(i)] = to_integer(d);
    first = false;
    last_index = index;
  }
  return true;
}

struct OptionRule {
  const char* key;
  int since, until;  // LibTorch versions as major*100+minor, both inclusive
  const char* allowed;
  Fill fill;
};

constexpr int kAny = 9999;
constexpr OptionRule kRules[] = {
    {"max_split_size_mb", 0, kAny, "an integer > 20 (MiB)", fill_max_split},
    {"roundup_power2_divisions",
     0,
     kAny,
     "0 or a power of two, or [MiB:d,...,>:d] from LibTorch 2.1",
     fill_divisions},
    {"roundup_bypass_threshold_mb", 0, 200, "an integer (MiB)", fill_bypass_threshold},
    {"garbage_collection_threshold",
     0,
     kAny,
     "a number strictly between 0 and 1",
     fill_gc_threshold},
    {"expandable_segments", 201, kAny, "True or False", fill_expandable},
    {"backend", 200, kAny, "native or cudaMallocAsync", fill_backend},
    {"release_lock_on_cudamalloc", 202, kAny, "True or False", check_boolean},
    {"max_non_split_rounding_mb", 206, kAny, "an integer > 20 (MiB)", fill_max_non_split_rounding},
    {"pinned_use_cuda_host_register", 202, kAny, "True or False", check_boolean},
    {"pinned_num_register_threads", 202, kAny, "a power of two up to 128", check_register_threads},
    {"pinned_use_background_threads", 206, kAny, "True or False", check_boolean},
};

[[noreturn]] void bad(std::string_view conf, const std::string& why) {
  throw std::invalid_argument("memory.alloc_conf \"" + std::string(conf) + "\": " + why);
}

struct AllocOption {
  std::string_view key, value;
};

// The options of `conf` in order ("k1:v1,k2:[a:b,c:d]" splits at commas outside brackets).
std::vector<AllocOption> split_alloc_conf(std::string_view conf) {
  std::vector<AllocOption> options;
  size_t pos = 0;
  while (pos < conf.size()) {
    // One option: key:value up to the next comma outside brackets.
    size_t end = pos;
    int depth = 0;
    for (; end < conf.size() && (depth > 0 || conf[end] != ','); ++end)
      depth += conf[end] == '[' ? 1 : conf[end] == ']' ? -1 : 0;
    const std::string_view option = conf.substr(pos, end - pos);
    pos = end + 1;
    const size_t colon = option.find(':');
    if (option.empty() || colon == std::string_view::npos)
      bad(conf, "\"" + std::string(option) + "\" is not key:value");
    options.push_back({option.substr(0, colon), option.substr(colon + 1)});
  }
  return options;
}

const OptionRule& rule_for(std::string_view conf, std::string_view key, TorchVersion torch) {
  std::string known;
  for (const auto& r : kRules) {
    if (torch.number() < r.since || torch.number() > r.until)
      continue;
    if (key == r.key)
      return r;
    known += (known.empty() ? "" : ", ") + std::string(r.key);
  }
  bad(conf,
      "unknown option " + std::string(key) + " for LibTorch " + torch.text() + "; known: " + known);
}

}  // namespace

AllocatorSettings read_alloc_conf(std::string_view conf, TorchVersion torch) {
  AllocatorSettings s;
  s.torch_version = std::min(torch.number(), kLatestModelled);
  for (const auto& [key, value] : split_alloc_conf(conf)) {
    const OptionRule& rule = rule_for(conf, key, torch);
    try {
      if (rule.fill(value, torch, s))
        continue;
    } catch (const std::invalid_argument& e) {
      bad(conf, e.what());
    }
    bad(conf,
        std::string(key) + ":" + std::string(value) + " is invalid; expected " + rule.allowed);
  }
  return s;
}

void validate_alloc_conf(std::string_view conf, TorchVersion torch) {
  (void)read_alloc_conf(conf, torch);
}

const char* alloc_conf_variable(TorchVersion) {
  return "PYTORCH_CUDA_ALLOC_CONF";
}

std::vector<const char*> alloc_conf_variables(TorchVersion torch) {
  if (torch.number() >= 209)
    return {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"};
  return {"PYTORCH_CUDA_ALLOC_CONF"};
}

std::string expandable_segments_effect(
    const AllocatorSettings& settings, int64_t segments, int64_t expandable) {
  const bool asked = settings.expandable_segments;
  const std::string counts =
      std::to_string(expandable) + " of " + std::to_string(segments) + " segments expandable";
  if (!asked)
    return expandable > 0 ? "expandable segments without expandable_segments:True (" + counts +
                                "): a setting from elsewhere"
                          : "";
  if (segments == 0)
    return "unknown: the allocator held no segment when read";
  if (expandable == 0)
    return "not in effect: expandable_segments:True was asked, but " + counts;
  return "in effect: " + counts;
}

}  // namespace oomguard::sim
