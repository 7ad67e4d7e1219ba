#pragma once
// What the SVG pictures share: the header, coordinates, the size axis (text escaping is
// oomguard::xml_escape, harness/xml_text.h).
#include <cstdint>
#include <string>

#include "harness/xml_text.h"

namespace oomguard::plot {

// The opening of a picture: the <svg> element of `width` x `height`, its title, a white
// background, and the title and subtitle written at x = `left`.
std::string svg_header(
    int width, int height, double left, const std::string& title, const std::string& subtitle);
// A coordinate with one decimal.
std::string num(double v);
// A tick step of 1, 2 or 5 times a power of ten of B, KiB, MiB or GiB giving at most 8 ticks
// from 0 to `top`.
int64_t tick_step(int64_t top);

}  // namespace oomguard::plot
