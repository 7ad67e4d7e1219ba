#pragma once
// What the SVG pictures share: text escaping, coordinates, the size axis.
#include <cstdint>
#include <string>

namespace oomguard::plot {

// `text` with &, <, > and " escaped for XML.
std::string escape(const std::string& text);
// A coordinate with one decimal.
std::string num(double v);
// A tick step of 1, 2 or 5 times a power of ten of B, KiB, MiB or GiB giving at most 8 ticks
// from 0 to `top`.
int64_t tick_step(int64_t top);

}  // namespace oomguard::plot
