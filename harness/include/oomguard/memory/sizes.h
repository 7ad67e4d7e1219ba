#pragma once
// Strict size parsing and formatting: "512MiB", "15.75GiB", "1.5GB", "4096" (bytes).
#include <cstdint>
#include <string>
#include <string_view>

namespace oomguard::memory {

// Bytes in `text`. Units B, KiB, MiB, GiB, TiB (1024) and KB, MB, GB, TB (1000); a bare
// number is bytes and must be an integer. Throws std::invalid_argument naming the input.
int64_t parse_size(std::string_view text);
// Compact and parseable: "512MiB", "15.75GiB", "4096B".
std::string format_size(int64_t bytes);

}  // namespace oomguard::memory
