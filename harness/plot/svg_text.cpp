#include "harness/plot/svg_text.h"

#include <cstdio>

namespace oomguard::plot {

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", v);
  return text;
}

int64_t tick_step(int64_t top) {
  static const int64_t kUnits[] = {
      1, int64_t{1} << 10, int64_t{1} << 20, int64_t{1} << 30, int64_t{1} << 40};
  static const int64_t kMultiples[] = {1, 2, 5, 10, 20, 50, 100, 200, 500};
  for (int64_t unit : kUnits)
    for (int64_t m : kMultiples)
      if ((top + m * unit - 1) / (m * unit) <= 8)
        return m * unit;
  return kUnits[4] * 1000;
}

}  // namespace oomguard::plot
