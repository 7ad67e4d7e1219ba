#include "harness/plot/svg_text.h"

#include <cstdio>

namespace oomguard::plot {

std::string svg_header(
    int width, int height, double left, const std::string& title, const std::string& subtitle) {
  const std::string w = std::to_string(width), h = std::to_string(height);
  return "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + w + "\" height=\"" + h +
         "\" viewBox=\"0 0 " + w + " " + h +
         "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"12\">\n<title>" +
         xml_escape(title) + "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n" +
         "<text x=\"" + num(left) + "\" y=\"24\" font-size=\"16\" font-weight=\"bold\">" +
         xml_escape(title) + "</text>\n<text x=\"" + num(left) + "\" y=\"44\" fill=\"#555555\">" +
         xml_escape(subtitle) + "</text>\n";
}

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f", v);
  return text;
}

int64_t tick_step(int64_t top) {
  static const int64_t kUnits[] = {
      1, int64_t{1} << 10, int64_t{1} << 20, int64_t{1} << 30, int64_t{1} << 40};
  static const int64_t kMultiples[] = {1, 2, 5, 10, 20, 50, 100, 200, 500};
  for (int64_t unit : kUnits)
    for (int64_t m : kMultiples)
      if ((top + m * unit - 1) / (m * unit) <= 8)
        return m * unit;
  return kUnits[4] * 1000;
}

}  // namespace oomguard::plot
