#pragma once
// Text inside the XML oomguard writes (JUnit files, SVG pictures): one escaping for both.
#include <string>
#include <string_view>

namespace oomguard {

// `text` with &, <, > and " escaped for element text and attribute values; control
// characters XML 1.0 does not allow (all below 0x20 but tab, newline and carriage return)
// written as spaces.
inline std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        const bool invalid =
            static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r';
        out += invalid ? ' ' : c;
    }
  }
  return out;
}

}  // namespace oomguard
