#pragma once
// Seeded synthetic corpus with a long-tail length distribution.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace oomguard::data {

struct CorpusConfig {
  int64_t num_samples = 512;
  int64_t max_length = 128;          // the collator's cut; lengths are drawn relative to it
  double long_tail_fraction = 0.03;  // share of samples several times longer than max_length
  double long_tail_factor = 6.0;     // long samples are up to this many times max_length
  uint64_t seed = 0;
  // data.sample_lengths: these samples (index, bytes) of these lengths, each one the generator
  // can draw (drawable_length), their text still drawn from the seed and every other sample as
  // drawn: a corpus the generator can draw, the one behind a worst case.
  std::vector<std::pair<size_t, int64_t>> sample_lengths;
};

// The longest sample make_synthetic_corpus can draw under `config`, in bytes: the draw
// lo + (hi - lo) * u, truncated, at the largest u the uniform distribution returns (just
// below 1), with hi long_tail_factor x max_length when any sample may be long-tail, else
// 0.9 x max_length. Floating-point rounding can make it hi itself.
int64_t longest_synthetic_length(const CorpusConfig& config);

// The shortest long-tail sample the generator can draw under `config`; 0 when it draws none.
int64_t shortest_long_tail_length(const CorpusConfig& config);

// Whether the generator can draw a sample of `bytes` under `config`; `ranges` says which it
// can ("32 .. 115 or 256 .. 768 bytes").
bool drawable_length(const CorpusConfig& config, int64_t bytes, std::string* ranges = nullptr);

// Sentences from a small fixed grammar, so a byte-level model can learn them (the loss
// falls within a few dozen steps). Most samples fall in [max_length/4, 0.9 max_length];
// a `long_tail_fraction` share is 2x..long_tail_factor x max_length, like untruncated records.
std::vector<std::string> make_synthetic_corpus(const CorpusConfig& config);

}  // namespace oomguard::data
