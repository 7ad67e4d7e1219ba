#pragma once
// Statistics of a repeated run: how often it fails, with how much confidence.
#include <cstdint>
#include <vector>

namespace oomguard::repeat {

struct Interval {
  double lo = 0.0;
  double hi = 0.0;
};

// Wilson score interval for k failures in n runs at the two-sided level of z (1.96: 95%).
Interval wilson_interval(int64_t k, int64_t n, double z = 1.959964);

// With no failure in n runs, the failure rate p is below this at `confidence`: the largest p
// with (1 - p)^n >= 1 - confidence (exact binomial; 12 runs at 95% give 22.1%).
double zero_failure_upper_bound(int64_t n, double confidence = 0.95);

struct Spread {
  int64_t min = 0;
  double median = 0.0;  // the mean of the middle two for an even count
  int64_t max = 0;
  int64_t count = 0;
};

// Min / median / max of `values`; all zero when empty.
Spread spread_of(std::vector<int64_t> values);

}  // namespace oomguard::repeat
