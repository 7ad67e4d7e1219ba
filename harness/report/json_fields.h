#pragma once
// Checked reading of a JSON document the user gave: each accessor names the file, where in it
// and what is wrong, and throws UsageError. The one way oomguard's report readers read JSON.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/usage_error.h"

namespace oomguard::report {

// A text field of a report: the string, or null where it is empty.
inline nlohmann::json or_null(const std::string& v) {
  return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
}

class Fields {
 public:
  explicit Fields(std::string source) : source_(std::move(source)) {}

  const std::string& source() const { return source_; }
  [[noreturn]] void bad(const std::string& what) const;

  // `where` names the object for messages ("the report", "phase train").
  const nlohmann::json& at(
      const nlohmann::json& j, const char* key, const std::string& where) const;
  const nlohmann::json& array(
      const nlohmann::json& j, const char* key, const std::string& where) const;
  std::string text(const nlohmann::json& j, const char* key, const std::string& where) const;
  // A string, or "" where the field is null or absent.
  std::string text_or_empty(
      const nlohmann::json& j, const char* key, const std::string& where) const;
  // Bytes: an integer within +-2^62 (growth may be negative); -1 where null or absent when
  // `optional`.
  int64_t bytes(
      const nlohmann::json& j, const char* key, const std::string& where, bool optional) const;
  int64_t integer(const nlohmann::json& j, const char* key, const std::string& where) const;
  double number(const nlohmann::json& j, const char* key, const std::string& where) const;
  // An object that may be absent or null (an empty object then); anything else is bad.
  nlohmann::json object(const nlohmann::json& j, const char* key, const std::string& where) const;

 private:
  std::string source_;
};

// The "schema" of `doc`, or "" where it has none.
std::string schema_of(const nlohmann::json& doc);

}  // namespace oomguard::report
