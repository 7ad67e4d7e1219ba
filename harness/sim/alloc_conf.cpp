#include <oomguard/sim/alloc_conf.h>

#include <stdexcept>
#include <vector>

namespace oomguard::sim {
namespace {

struct OptionRule {
  const char* key;
  int since, until;  // LibTorch versions as major*100+minor, both inclusive
  const char* allowed;
  bool (*valid)(std::string_view value);
};

bool is_integer(std::string_view v) {
  if (v.empty() || v.size() > 9)
    return false;
  for (char c : v)
    if (c < '0' || c > '9')
      return false;
  return true;
}
long to_integer(std::string_view v) {
  return std::stol(std::string(v));
}
bool power_of_two_or_zero(long n) {
  return n >= 0 && (n & (n - 1)) == 0;
}
bool over_20_mib(std::string_view v) {
  return is_integer(v) && to_integer(v) > 20;
}
bool boolean(std::string_view v) {
  return v == "True" || v == "False";
}
bool fraction(std::string_view v) {
  try {
    size_t used = 0;
    const double x = std::stod(std::string(v), &used);
    return used == v.size() && x > 0.0 && x < 1.0;
  } catch (const std::exception&) {
    return false;
  }
}
bool divisions(std::string_view v) {
  if (is_integer(v))
    return power_of_two_or_zero(to_integer(v));
  // [K1:d1,K2:d2,...,>:dn]: K in MiB, a power of two; d zero or a power of two.
  if (v.size() < 2 || v.front() != '[' || v.back() != ']')
    return false;
  std::string_view list = v.substr(1, v.size() - 2);
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos)
      return false;
    const std::string_view k = item.substr(0, colon), d = item.substr(colon + 1);
    if (!(k == ">" || (is_integer(k) && to_integer(k) > 0 && power_of_two_or_zero(to_integer(k)))))
      return false;
    if (!is_integer(d) || !power_of_two_or_zero(to_integer(d)))
      return false;
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return true;
}
bool backend(std::string_view v) {
  return v == "native" || v == "cudaMallocAsync";
}
bool register_threads(std::string_view v) {
  return is_integer(v) && to_integer(v) >= 1 && to_integer(v) <= 128 &&
         power_of_two_or_zero(to_integer(v));
}

constexpr int kAny = 9999;
const std::vector<OptionRule>& rules() {
  static const std::vector<OptionRule> r = {
      {"max_split_size_mb", 0, kAny, "an integer > 20 (MiB)", over_20_mib},
      {"roundup_power2_divisions",
       0,
       kAny,
       "0 or a power of two, or [MiB:d,...,>:d] from LibTorch 2.1",
       divisions},
      {"roundup_bypass_threshold_mb", 0, 200, "an integer (MiB)", is_integer},
      {"garbage_collection_threshold", 0, kAny, "a number strictly between 0 and 1", fraction},
      {"expandable_segments", 201, kAny, "True or False", boolean},
      {"backend", 200, kAny, "native or cudaMallocAsync", backend},
      {"release_lock_on_cudamalloc", 202, kAny, "True or False", boolean},
      {"max_non_split_rounding_mb", 206, kAny, "an integer > 20 (MiB)", over_20_mib},
      {"pinned_use_cuda_host_register", 202, kAny, "True or False", boolean},
      {"pinned_num_register_threads", 202, kAny, "a power of two up to 128", register_threads},
      {"pinned_use_background_threads", 206, kAny, "True or False", boolean},
  };
  return r;
}

[[noreturn]] void bad(std::string_view conf, const std::string& why) {
  throw std::invalid_argument("memory.alloc_conf \"" + std::string(conf) + "\": " + why);
}

}  // namespace

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

void validate_alloc_conf(std::string_view conf, TorchVersion torch) {
  for (const auto& [key, value] : split_alloc_conf(conf)) {
    std::string known;
    const OptionRule* rule = nullptr;
    for (const auto& r : rules()) {
      if (torch.number() < r.since || torch.number() > r.until)
        continue;
      known += (known.empty() ? "" : ", ") + std::string(r.key);
      if (key == r.key)
        rule = &r;
    }
    if (rule == nullptr)
      bad(conf,
          "unknown option " + std::string(key) + " for LibTorch " + std::to_string(torch.major) +
              "." + std::to_string(torch.minor) + "; known: " + known);
    if (!rule->valid(value))
      bad(conf,
          std::string(key) + ":" + std::string(value) + " is invalid; expected " + rule->allowed);
  }
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
    std::string_view conf, int64_t segments, int64_t expandable) {
  bool asked = false;
  for (const AllocOption& option : split_alloc_conf(conf))
    if (option.key == "expandable_segments")
      asked = option.value == "True" || option.value == "true";
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
