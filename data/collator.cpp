#include "data/collator.h"

#include <algorithm>

#include <ATen/ops/full.h>

#include "data/tokenizer.h"

namespace oomguard::data {

Batch collate(const std::vector<const std::string*>& samples, const CollatorOptions& options) {
  const auto B = static_cast<int64_t>(samples.size());
  std::vector<std::vector<int64_t>> encoded;
  encoded.reserve(samples.size());
  int64_t longest = 1;
  for (const std::string* sample : samples) {
    // No more than max_length + 1 bytes can reach the batch: an enormous line costs no more.
    encoded.push_back(
        encode(std::string_view(*sample).substr(0, static_cast<size_t>(options.max_length) + 1)));
    longest = std::max(longest, static_cast<int64_t>(encoded.back().size()) - 1);
  }
  const int64_t T =
      options.pad_to_longest ? std::min(longest, options.max_length) : options.max_length;
  at::Tensor input_ids = at::full({B, T}, kPadId, at::kLong);
  at::Tensor labels = at::full({B, T}, kIgnoreIndex, at::kLong);
  int64_t* inputs = input_ids.data_ptr<int64_t>();
  int64_t* targets = labels.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t>& ids = encoded[static_cast<size_t>(b)];
    const auto n = std::min<int64_t>(static_cast<int64_t>(ids.size()) - 1, T);
    for (int64_t t = 0; t < n; ++t) {
      inputs[b * T + t] = ids[static_cast<size_t>(t)];
      targets[b * T + t] = ids[static_cast<size_t>(t + 1)];
    }
  }
  return {input_ids, labels};
}

}  // namespace oomguard::data
