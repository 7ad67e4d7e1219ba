#pragma once
// Truncating collator: token lists -> fixed-shape [B, T] inputs and shifted labels.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace oomguard::data {

constexpr int64_t kIgnoreIndex = -100;

struct Batch {
  at::Tensor input_ids;  // [B, T] int64, padded with kPadId
  at::Tensor labels;     // [B, T] int64, input shifted by one; kIgnoreIndex on padding

  // The batch on `device`; no copy when it is there already.
  Batch to(c10::Device device) const { return {input_ids.to(device), labels.to(device)}; }
};

struct CollatorOptions {
  int64_t max_length = 128;  // T: every batch has exactly this many positions
  // The `truncate` guard switched off: T is the longest sample of the batch (still at most
  // max_length, which the caller then sets to the model's position limit), so shapes jitter.
  bool pad_to_longest = false;
};

// Encodes each sample, cuts it to max_length + 1 tokens (inputs and labels are the sequence
// shifted by one, so T = max_length) and pads to T: one shape for every batch.
Batch collate(const std::vector<const std::string*>& samples, const CollatorOptions& options);

}  // namespace oomguard::data
