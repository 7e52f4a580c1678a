#include "common/fields.h"

namespace agentenv {

// Replaces bytes that are not UTF-8 instead of throwing when dumped.
json ToJson(const std::string& v) { return json(v); }

json ToJson(const std::map<std::string, std::string>& v) {
  json o = json::object();
  for (const auto& [k, s] : v) o[k] = s;
  return o;
}

std::optional<std::string> FromJson(const json& j, std::string& v) {
  if (!j.is_string()) return "a string";
  v = j.get<std::string>();
  return std::nullopt;
}

std::optional<std::string> FromJson(const json& j, bool& v) {
  if (!j.is_boolean()) return "a boolean";
  v = j.get<bool>();
  return std::nullopt;
}

std::optional<std::string> FromJson(const json& j, double& v) {
  if (!j.is_number()) return "a number";
  v = j.get<double>();
  return std::nullopt;
}

std::optional<std::string> FromJson(const json& j, json& v) {
  v = j;
  return std::nullopt;
}

std::optional<std::string> FromJson(const json& j, std::map<std::string, std::string>& v) {
  if (!j.is_object()) return "an object of strings";
  v.clear();
  for (const auto& [k, s] : j.items()) {
    if (!s.is_string()) return "an object of strings ('" + k + "' is not a string)";
    v[k] = s.get<std::string>();
  }
  return std::nullopt;
}

std::optional<std::string> FieldReader::Finish() const {
  if (error_) return error_;
  if (!strict_ || !in_.is_object()) return std::nullopt;
  for (const auto& [key, value] : in_.items()) {
    bool found = false;
    for (const auto& k : known_) found |= k == key;
    if (found) continue;
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    return "unknown argument '" + key + "' (known: " + (list.empty() ? "none" : list) + ")";
  }
  return std::nullopt;
}

}  // namespace agentenv
