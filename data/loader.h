#pragma once
// Seeded shuffling loader: epochs of batches whose order depends on the seed, or a given order.
#include <cstdint>
#include <string>
#include <vector>

#include "data/collator.h"

namespace oomguard::data {

class Loader {
 public:
  // `given`: the sample indices to take, in this order, again from its start when it runs out
  // (data.train_order, data.evaluate_order); empty: every sample once per epoch, shuffled from
  // the seed.
  Loader(
      const std::vector<std::string>& samples,
      int64_t batch_size,
      uint64_t seed,
      CollatorOptions collator,
      std::vector<size_t> given = {});

  // The next batch; a new epoch (reshuffled) starts when the samples run out.
  Batch next();
  // Indices of the samples in the batch that next() returned last.
  const std::vector<size_t>& last_indices() const { return last_; }

 private:
  void reshuffle();

  const std::vector<std::string>& samples_;
  int64_t batch_size_;
  uint64_t seed_;
  uint64_t epoch_ = 0;
  CollatorOptions collator_;
  std::vector<size_t> given_;
  std::vector<size_t> order_;
  size_t cursor_ = 0;
  std::vector<size_t> last_;
};

}  // namespace oomguard::data
