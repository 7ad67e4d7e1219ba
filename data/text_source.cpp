#include "data/text_source.h"

#include <fstream>
#include <istream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace oomguard::data {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<std::string> read_samples(const std::string& path, const std::string& field) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::invalid_argument("data file " + path + ": cannot be opened; check the path");
  }
  return parse_samples(in, path, ends_with(path, ".jsonl"), field);
}

std::vector<std::string> parse_samples(
    std::istream& in, const std::string& path, bool jsonl, const std::string& field) {
  std::vector<std::string> samples;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    const std::string where = "data file " + path + ":" + std::to_string(line_no);
    if (line.find('\0') != std::string::npos) {
      throw std::invalid_argument(where + ": binary content; expected UTF-8 text");
    }
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (line.empty()) {
      continue;
    }
    if (!jsonl) {
      samples.push_back(line);
      continue;
    }
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) {
      throw std::invalid_argument(where + ": not a JSON object");
    }
    const auto it = record.find(field);
    if (it == record.end() || !it->is_string()) {
      throw std::invalid_argument(where + ": no string field \"" + field + "\"");
    }
    samples.push_back(it->get<std::string>());
  }
  if (samples.empty()) {
    throw std::invalid_argument("data file " + path + ": holds no samples");
  }
  return samples;
}

}  // namespace oomguard::data
