#include "data/tokenizer.h"

namespace oomguard::data {

std::vector<int64_t> encode(std::string_view text) {
  std::vector<int64_t> ids;
  ids.reserve(text.size() + 1);
  for (char c : text) {
    ids.push_back(static_cast<unsigned char>(c));
  }
  ids.push_back(kEosId);
  return ids;
}

std::string decode(const std::vector<int64_t>& ids) {
  std::string text;
  for (int64_t id : ids) {
    if (id >= 0 && id < 256) {
      text.push_back(static_cast<char>(id));
    }
  }
  return text;
}

}  // namespace oomguard::data
