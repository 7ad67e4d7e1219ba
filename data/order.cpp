#include "data/order.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace oomguard::data {

std::vector<size_t> epoch_order(size_t samples, uint64_t seed, uint64_t epoch) {
  std::vector<size_t> order(samples);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + epoch);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

std::vector<size_t> seeded_draws(size_t samples, uint64_t seed, size_t draws) {
  std::vector<size_t> out;
  out.reserve(draws);
  for (uint64_t epoch = 0; out.size() < draws && samples > 0; ++epoch) {
    const std::vector<size_t> order = epoch_order(samples, seed, epoch);
    out.insert(out.end(), order.begin(), order.begin() + std::min(samples, draws - out.size()));
  }
  return out;
}

}  // namespace oomguard::data
