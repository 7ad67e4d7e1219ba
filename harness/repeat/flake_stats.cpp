#include "harness/repeat/flake_stats.h"

#include <algorithm>
#include <cmath>

namespace oomguard::repeat {

Interval wilson_interval(int64_t k, int64_t n, double z) {
  if (n <= 0) {
    return {0.0, 1.0};
  }
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = z * z;
  const double centre = (p + z2 / (2.0 * nn)) / (1.0 + z2 / nn);
  const double half = z / (1.0 + z2 / nn) * std::sqrt(p * (1.0 - p) / nn + z2 / (4.0 * nn * nn));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double zero_failure_upper_bound(int64_t n, double confidence) {
  if (n <= 0) {
    return 1.0;
  }
  return 1.0 - std::pow(1.0 - confidence, 1.0 / static_cast<double>(n));
}

Spread spread_of(std::vector<int64_t> values) {
  Spread s;
  if (values.empty()) {
    return s;
  }
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  s.count = static_cast<int64_t>(n);
  s.min = values.front();
  s.max = values.back();
  s.median =
      n % 2 == 1
          ? static_cast<double>(values[n / 2])
          : (static_cast<double>(values[n / 2 - 1]) + static_cast<double>(values[n / 2])) / 2.0;
  return s;
}

}  // namespace oomguard::repeat
