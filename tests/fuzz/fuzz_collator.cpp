// Fuzz target: tokeniser + collator. The first byte sets max_length (2..65) and the
// pad_to_longest switch; the rest, split at '\n', are the samples of one batch. Every batch
// has B rows of T <= max_length positions (exactly max_length unless padding to the longest),
// ids in the vocabulary, and labels that are the inputs shifted by one or ignored.
#include <cstdint>
#include <string>
#include <vector>

#include "data/collator.h"
#include "data/tokenizer.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace oomguard;
  if (size == 0)
    return 0;
  data::CollatorOptions options;
  options.max_length = 2 + (data[0] & 63);
  options.pad_to_longest = data[0] & 64;
  std::vector<std::string> samples(1);
  for (size_t i = 1; i < size && samples.size() <= 64; ++i) {
    if (data[i] == '\n')
      samples.emplace_back();
    else
      samples.back().push_back(static_cast<char>(data[i]));
  }
  std::vector<const std::string*> batch;
  for (const auto& s : samples)
    batch.push_back(&s);

  const data::Batch out = data::collate(batch, options);
  const auto B = static_cast<int64_t>(samples.size());
  fuzz::require(out.input_ids.dim() == 2 && out.input_ids.size(0) == B, "inputs are [B, T]");
  fuzz::require(out.labels.sizes() == out.input_ids.sizes(), "labels match inputs");
  const int64_t T = out.input_ids.size(1);
  fuzz::require(T >= 1 && T <= options.max_length, "T within 1..max_length");
  fuzz::require(options.pad_to_longest || T == options.max_length, "fixed shape when truncating");
  const int64_t* in = out.input_ids.data_ptr<int64_t>();
  const int64_t* lab = out.labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const std::string& s = samples[static_cast<size_t>(b)];
    const auto n = static_cast<int64_t>(s.size());
    const auto byte = [&s](int64_t i) { return static_cast<int64_t>(static_cast<uint8_t>(s[i])); };
    for (int64_t t = 0; t < T; ++t) {
      const int64_t id = in[b * T + t], label = lab[b * T + t];
      if (t < n) {  // text: the byte, and the next byte (or end of sequence) as the label
        fuzz::require(id == byte(t), "inputs are the sample's bytes");
        fuzz::require(label == (t + 1 < n ? byte(t + 1) : data::kEosId), "labels shifted by one");
      } else {  // padding, ignored by the loss
        fuzz::require(id == data::kPadId, "padding after the text");
        fuzz::require(label == data::kIgnoreIndex, "padding ignored by the loss");
      }
    }
  }
  return 0;
}
