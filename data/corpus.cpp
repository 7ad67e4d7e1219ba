#include "data/corpus.h"

#include <algorithm>
#include <array>
#include <cmath>
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

// The draw's bounds for a sample: [lo, hi) bytes.
struct LengthRange {
  double lo, hi;
};
LengthRange length_range(const CorpusConfig& config, bool long_tail) {
  const double max_length = static_cast<double>(config.max_length);
  return long_tail ? LengthRange{2.0 * max_length, config.long_tail_factor * max_length}
                   : LengthRange{0.25 * max_length, 0.9 * max_length};
}

size_t draw_length(const LengthRange& r, double u) {
  return static_cast<size_t>(r.lo + (r.hi - r.lo) * u);
}

// Sentences of the grammar until `text` holds `target` bytes, cut there.
void add_sentences(std::string& text, size_t target, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> word(0, 7);
  while (text.size() < target) {
    text += kSubjects[word(rng)];
    text += ' ';
    text += kVerbs[word(rng)];
    text += ' ';
    text += kObjects[word(rng)];
    text += ". ";
  }
  text.resize(target);
}

}  // namespace

int64_t longest_synthetic_length(const CorpusConfig& config) {
  // generate_canonical never returns 1: at most the double just below it. The draw is
  // monotone in u, so that u gives the longest sample.
  const double u_max = std::nextafter(1.0, 0.0);
  const size_t short_max = draw_length(length_range(config, false), u_max);
  if (config.long_tail_fraction <= 0.0)
    return static_cast<int64_t>(short_max);
  return static_cast<int64_t>(std::max(short_max, draw_length(length_range(config, true), u_max)));
}

int64_t shortest_long_tail_length(const CorpusConfig& config) {
  if (config.long_tail_fraction <= 0.0)
    return 0;
  return static_cast<int64_t>(draw_length(length_range(config, /*long_tail=*/true), 0.0));
}

bool drawable_length(const CorpusConfig& config, int64_t bytes, std::string* ranges) {
  const double u_max = std::nextafter(1.0, 0.0);
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const bool long_tail : {false, true}) {
    if (long_tail ? config.long_tail_fraction <= 0.0 : config.long_tail_fraction >= 1.0)
      continue;
    const LengthRange r = length_range(config, long_tail);
    spans.emplace_back(
        static_cast<int64_t>(draw_length(r, 0.0)), static_cast<int64_t>(draw_length(r, u_max)));
  }
  bool inside = false;
  if (ranges != nullptr)
    ranges->clear();
  for (const auto& [lo, hi] : spans) {
    inside = inside || (bytes >= lo && bytes <= hi);
    if (ranges != nullptr)
      *ranges += (ranges->empty() ? "" : " or ") + std::to_string(lo) + " .. " + std::to_string(hi);
  }
  if (ranges != nullptr)
    *ranges += " bytes";
  return inside;
}

std::vector<std::string> make_synthetic_corpus(const CorpusConfig& config) {
  std::mt19937_64 rng(config.seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto longest = static_cast<size_t>(longest_synthetic_length(config));
  (void)longest;
  std::vector<int64_t> given(static_cast<size_t>(config.num_samples), -1);
  for (const auto& [i, bytes] : config.sample_lengths)
    if (i < given.size())
      given[i] = bytes;

  std::vector<std::string> samples;
  samples.reserve(static_cast<size_t>(config.num_samples));
  for (int64_t i = 0; i < config.num_samples; ++i) {
    const bool long_tail = unit(rng) < config.long_tail_fraction;
    const size_t drawn = draw_length(length_range(config, long_tail), unit(rng));
    std::string text;
    add_sentences(text, drawn, rng);
    if (const int64_t bytes = given[static_cast<size_t>(i)]; bytes >= 0) {
      // Lengthened from a stream of its own: every other sample stays as the seed draws it.
      std::mt19937_64 more(config.seed ^ (0xA24BAED4963EE407ull * static_cast<uint64_t>(i + 1)));
      add_sentences(text, static_cast<size_t>(bytes), more);
      text.resize(static_cast<size_t>(bytes));
    }
    samples.push_back(std::move(text));
  }
  return samples;
}

}  // namespace oomguard::data
