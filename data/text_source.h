#pragma once
// Samples from a file: plain text (one sample per non-empty line) or JSON Lines.
#include <iosfwd>
#include <string>
#include <vector>

namespace oomguard::data {

// Reads `path`. A `.jsonl` file gives one sample per line from the string field `field`;
// anything else gives one sample per non-empty line. Throws std::invalid_argument naming the
// file (and line) when the file is missing, unreadable, empty, binary or malformed.
std::vector<std::string> read_samples(const std::string& path, const std::string& field = "text");

// What read_samples does once the file is open: `path` only names it in the messages.
std::vector<std::string> parse_samples(
    std::istream& in, const std::string& path, bool jsonl, const std::string& field = "text");

}  // namespace oomguard::data
