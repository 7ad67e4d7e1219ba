#pragma once
// Byte-level tokenizer: token ids 0..255 are bytes; two specials follow.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace oomguard::data {

constexpr int64_t kPadId = 256;
constexpr int64_t kEosId = 257;
constexpr int64_t kVocabSize = 258;

// Bytes of `text` as ids, followed by kEosId.
std::vector<int64_t> encode(std::string_view text);
// Inverse of encode; specials are dropped.
std::string decode(const std::vector<int64_t>& ids);

}  // namespace oomguard::data
