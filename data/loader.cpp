#include "data/loader.h"

#include <algorithm>
#include <utility>

#include <c10/util/Exception.h>

#include "data/order.h"

namespace oomguard::data {

Loader::Loader(
    const std::vector<std::string>& samples,
    int64_t batch_size,
    uint64_t seed,
    CollatorOptions collator,
    std::vector<size_t> given)
    : samples_(samples),
      batch_size_(batch_size),
      seed_(seed),
      collator_(collator),
      given_(std::move(given)) {
  TORCH_CHECK(!samples_.empty(), "loader: no samples");
  TORCH_CHECK(batch_size_ > 0, "loader: batch_size must be positive, got ", batch_size_);
  for (const size_t i : given_)
    TORCH_CHECK(
        i < samples_.size(),
        "loader: sample ",
        i,
        " in the given order, but there are ",
        samples_.size(),
        " samples");
  reshuffle();
}

void Loader::reshuffle() {
  if (!given_.empty()) {
    order_ = given_;
    cursor_ = 0;
    ++epoch_;
    return;
  }
  order_ = epoch_order(samples_.size(), seed_, epoch_);
  cursor_ = 0;
  ++epoch_;
}

Batch Loader::next() {
  last_.clear();
  std::vector<const std::string*> batch;
  while (static_cast<int64_t>(batch.size()) < batch_size_) {
    if (cursor_ == order_.size()) {
      reshuffle();
    }
    last_.push_back(order_[cursor_]);
    batch.push_back(&samples_[order_[cursor_++]]);
  }
  return collate(batch, collator_);
}

}  // namespace oomguard::data
