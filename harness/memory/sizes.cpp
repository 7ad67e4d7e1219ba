#include <oomguard/memory/sizes.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace oomguard::memory {
namespace {

constexpr std::array<std::pair<std::string_view, double>, 9> kUnits = {{
    {"B", 1.0},
    {"KiB", 1024.0},
    {"MiB", 1024.0 * 1024},
    {"GiB", 1024.0 * 1024 * 1024},
    {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
}};

// The largest size parse_size accepts; format_size never prints more than this.
constexpr double kLargestSize = 9.0e18;

[[noreturn]] void bad_size(std::string_view text, const char* why) {
  throw std::invalid_argument(
      "size \"" + std::string(text) + "\": " + why +
      "; expected e.g. 512MiB, 15.75GiB, 1.5GB or 4096 (bytes)");
}

}  // namespace

int64_t parse_size(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) != 0)) {
    ++i;
  }
  const size_t int_digits = i;
  size_t frac_digits = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) != 0)) {
      ++i;
      ++frac_digits;
    }
    if (frac_digits == 0) {
      bad_size(text, "a decimal point needs digits after it");
    }
  }
  if (int_digits == 0) {
    bad_size(text, "does not start with a number");
  }
  if (int_digits > 15) {
    bad_size(text, "too large");
  }
  const std::string_view unit = text.substr(i);
  double scale = 0.0;
  if (unit.empty()) {
    if (frac_digits > 0) {
      bad_size(text, "a byte count must be a whole number");
    }
    scale = 1.0;
  }
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) {
      scale = factor;
    }
  }
  if (scale == 0.0) {
    bad_size(text, "unknown unit (allowed: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  }
  const double bytes = std::stod(std::string(text.substr(0, i))) * scale;
  if (bytes > kLargestSize) {
    bad_size(text, "too large");
  }
  return static_cast<int64_t>(std::llround(bytes));
}

std::string format_size(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const char* unit = "B";
  double value = b, unit_bytes = 1.0;
  for (const auto& [name, factor] :
       {std::pair<const char*, double>{"KiB", 1024.0},
        {"MiB", 1024.0 * 1024},
        {"GiB", 1024.0 * 1024 * 1024},
        {"TiB", 1024.0 * 1024 * 1024 * 1024}}) {
    if (std::abs(b) >= factor) {
      unit = name;
      unit_bytes = factor;
      value = b / factor;
    }
  }
  if (unit[0] == 'B') {
    return std::to_string(bytes) + "B";
  }
  // Two decimals, rounded to nearest; near the parser's limit rounded down, so that every
  // display parses back (found by fuzzing: 9000000000GB printed as 8185452.32TiB, too large).
  if (std::round(value * 100) / 100 * unit_bytes > kLargestSize) {
    value = std::floor(value * 100) / 100;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", value);
  std::string digits = buf;
  while (digits.back() == '0') {
    digits.pop_back();
  }
  if (digits.back() == '.') {
    digits.pop_back();
  }
  return digits + unit;
}

}  // namespace oomguard::memory
