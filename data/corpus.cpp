#include "data/corpus.h"

#include <array>
#include <random>

namespace oomguard::data {
namespace {

constexpr std::array<const char*, 8> kSubjects = {
    "the model",
    "a tensor",
    "the cache",
    "the card",
    "a batch",
    "the loader",
    "the kernel",
    "a gradient"};
constexpr std::array<const char*, 8> kVerbs = {
    "allocates", "frees", "reads", "writes", "checks", "copies", "measures", "keeps"};
constexpr std::array<const char*, 8> kObjects = {
    "memory",
    "the peak",
    "a block",
    "every step",
    "the budget",
    "one shape",
    "the logits",
    "its state"};

}  // namespace

std::vector<std::string> make_synthetic_corpus(const CorpusConfig& config) {
  std::mt19937_64 rng(config.seed);
  std::uniform_int_distribution<size_t> word(0, 7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double max_length = static_cast<double>(config.max_length);

  std::vector<std::string> samples;
  samples.reserve(static_cast<size_t>(config.num_samples));
  for (int64_t i = 0; i < config.num_samples; ++i) {
    const bool long_tail = unit(rng) < config.long_tail_fraction;
    const double lo = long_tail ? 2.0 * max_length : 0.25 * max_length;
    const double hi = long_tail ? config.long_tail_factor * max_length : 0.9 * max_length;
    const auto target = static_cast<size_t>(lo + (hi - lo) * unit(rng));
    std::string text;
    while (text.size() < target) {
      text += kSubjects[word(rng)];
      text += ' ';
      text += kVerbs[word(rng)];
      text += ' ';
      text += kObjects[word(rng)];
      text += ". ";
    }
    text.resize(target);
    samples.push_back(std::move(text));
  }
  return samples;
}

}  // namespace oomguard::data
