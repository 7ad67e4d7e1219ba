#include "harness/report/json_fields.h"

namespace oomguard::report {
namespace {

constexpr int64_t kLargestBytes = int64_t{1} << 62;  // far above any card, far below overflow

}  // namespace

void Fields::bad(const std::string& what) const {
  throw UsageError(source_ + ": " + what);
}

const nlohmann::json& Fields::at(
    const nlohmann::json& j, const char* key, const std::string& where) const {
  if (!j.is_object())
    bad(where + " is not an object");
  const auto it = j.find(key);
  if (it == j.end())
    bad(where + " has no \"" + key + "\"");
  return *it;
}

const nlohmann::json& Fields::array(
    const nlohmann::json& j, const char* key, const std::string& where) const {
  const nlohmann::json& v = at(j, key, where);
  if (!v.is_array())
    bad(where + "." + key + " is not a list");
  return v;
}

std::string Fields::text(const nlohmann::json& j, const char* key, const std::string& where) const {
  const nlohmann::json& v = at(j, key, where);
  if (!v.is_string())
    bad(where + "." + key + " is not a string");
  return v.get<std::string>();
}

std::string Fields::text_or_empty(
    const nlohmann::json& j, const char* key, const std::string& where) const {
  if (!j.is_object() || !j.contains(key) || j[key].is_null())
    return "";
  return text(j, key, where);
}

int64_t Fields::bytes(
    const nlohmann::json& j, const char* key, const std::string& where, bool optional) const {
  if (optional && j.is_object() && (!j.contains(key) || j[key].is_null()))
    return -1;
  const nlohmann::json& v = at(j, key, where);
  const bool fits = v.is_number_integer() &&
                    (v.is_number_unsigned()
                         ? v.get<uint64_t>() <= uint64_t{kLargestBytes}
                         : v.get<int64_t>() >= -kLargestBytes && v.get<int64_t>() <= kLargestBytes);
  if (!fits)
    bad(where + "." + key + " is not a byte count: " + v.dump());
  return v.get<int64_t>();
}

int64_t Fields::integer(const nlohmann::json& j, const char* key, const std::string& where) const {
  const nlohmann::json& v = at(j, key, where);
  if (!v.is_number_integer())
    bad(where + "." + key + " is not an integer: " + v.dump());
  return v.get<int64_t>();
}

double Fields::number(const nlohmann::json& j, const char* key, const std::string& where) const {
  const nlohmann::json& v = at(j, key, where);
  if (!v.is_number())
    bad(where + "." + key + " is not a number: " + v.dump());
  return v.get<double>();
}

nlohmann::json Fields::object(
    const nlohmann::json& j, const char* key, const std::string& where) const {
  if (!j.is_object() || !j.contains(key) || j[key].is_null())
    return nlohmann::json::object();
  if (!j[key].is_object())
    bad(where + "." + key + " is not an object");
  return j[key];
}

std::string schema_of(const nlohmann::json& doc) {
  if (!doc.is_object())
    return "";
  const auto it = doc.find("schema");
  return it != doc.end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace oomguard::report
